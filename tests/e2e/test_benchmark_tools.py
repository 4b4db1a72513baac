"""The benchmark tools benchmarks/README.md runs: they start and report.

The long runs (``run.py``, ``profile_place_bet.py``) are not run here; their CPU accounting is,
on a process of the test's own, and ``hot_path_parts.py`` and ``writer_child.py`` run whole with
few rounds.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def benchmark(name: str) -> ModuleType:
    """A module of benchmarks/, imported as its scripts import each other (their directory on
    the path, as when one is run)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


def test_hot_path_parts_reports_each_part_old_and_new() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "hot_path_parts.py"), "--rounds", "640"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = {line[:22].strip(): line[22:].split() for line in done.stdout.splitlines()[1:]}
    assert set(rows) == {"wait for the writer", "its deadline", "delivery log line", "metrics"}
    assert all(len(figures) == 2 for figures in rows.values())


@pytest.mark.parametrize("script", ["run.py", "profile_place_bet.py", "threads.py"])
def test_the_long_benchmarks_explain_their_options(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BENCHMARKS,
    )
    assert done.returncode == 0, done.stderr
    assert "--seconds" in done.stdout


def test_server_cpu_is_counted_over_the_process_and_its_children() -> None:
    accounting = benchmark("accounting")
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    child = subprocess.Popen([sys.executable, "-c", burn + "time.sleep(60)"])
    try:
        for _ in range(600):  # until it has burnt its 0.3 s (slowly on a loaded machine)
            if accounting.tree_cpu_seconds(child.pid)[0] >= 0.3:
                break
            time.sleep(0.1)
        total, main = accounting.tree_cpu_seconds(child.pid)
        assert total >= 0.3
        assert main == pytest.approx(total, abs=0.05)  # one thread: its main one
        # Counted in its parent's tree too, as workers are in their supervisor's.
        assert accounting.tree_cpu_seconds(os.getpid())[0] >= total
    finally:
        child.kill()
        child.wait()


def test_writer_child_reports_its_cost_by_phase_and_statement_and_its_commits_log_pages() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "writer_child.py"),
            "--place-bets",
            "320",
            "--batch",
            "16",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["place_bets"] == 320
    assert figures["cpu_us_per_place_bet"] > 0
    phases = figures["phases_us_per_place_bet"]
    for phase in ("commit", "post (transactions, postings, balances)", "delivery journal"):
        assert phases[phase] > 0
    # On SQLite, what each statement cost, by verb and table.
    statements = figures["statements_us_per_place_bet"]
    for statement in ("INSERT INTO bets", "INSERT INTO postings", "UPDATE accounts"):
        assert statements[statement] > 0
    # Every commit appends at least the pages of the rows it wrote, and a Place Bet writes rows
    # into several tables.
    assert figures["wal_pages_per_commit"] >= 5


def test_writer_child_places_new_bets_on_a_database_measured_before(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'measured.db'}"
    for _ in range(2):
        done = subprocess.run(
            [
                sys.executable,
                str(BENCHMARKS / "writer_child.py"),
                "--place-bets",
                "64",
                "--batch",
                "16",
                "--db",
                database,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        # Re-sends of the first run's bets would write no bet and no posting.
        statements = json.loads(done.stdout)["statements_us_per_place_bet"]
        assert statements["INSERT INTO bets"] > 0
        assert statements["INSERT INTO postings"] > 0


def test_the_machines_idle_share_is_what_the_cores_left_unused() -> None:
    accounting = benchmark("accounting")
    assert accounting.idle_share((1000, 400, 0, 0), (1400, 500, 0, 0)) == pytest.approx(0.25)
    assert (
        accounting.idle_share((1000, 400, 0, 0), (1000, 400, 0, 0)) == 0
    )  # no tick between: nothing to say
    total, idle, stolen, disk = accounting.machine_ticks()
    assert total >= idle + stolen
    assert idle >= disk >= 0
    assert stolen >= 0


def test_the_stolen_share_is_the_hypervisors_part_of_all_cores_time() -> None:
    accounting = benchmark("accounting")
    assert accounting.steal_share((1000, 400, 10, 0), (1400, 500, 30, 0)) == pytest.approx(0.05)
    assert accounting.steal_share((1000, 400, 10, 0), (1000, 400, 10, 0)) == 0
    figure, echo = {"machine_steal_share": 0.11}, {"machine_steal_share": 0.17}
    assert accounting.stolen(figure, echo) == ", stolen 11% (echo 17%)"
    assert accounting.stolen(figure) == ", stolen 11%"
    assert accounting.stolen({}, echo) == ""  # a results file from before the steal was measured


def test_the_disk_wait_is_the_part_of_idle_time_a_process_waited_for_the_disk() -> None:
    accounting = benchmark("accounting")
    before, after = (1000, 400, 0, 100), (1400, 500, 0, 140)
    assert accounting.disk_wait_share(before, after) == pytest.approx(0.10)
    assert accounting.disk_wait_share(before, after) <= accounting.idle_share(before, after)
    assert accounting.disk_wait_share(before, before) == 0
    figure, echo = {"machine_disk_wait_share": 0.09}, {"machine_disk_wait_share": 0.0}
    assert accounting.disk_wait(figure, echo) == ", disk wait 9% (echo 0%)"
    assert accounting.disk_wait(figure) == ", disk wait 9%"
    assert accounting.disk_wait({}, echo) == ""  # a results file from before it was measured


def test_the_place_bet_body_of_the_embedded_benchmarks_is_the_one_wrk_sends() -> None:
    servers = benchmark("servers")
    lua = (BENCHMARKS / "place_bet.lua").read_text()
    # The format string of request(): its quoted pieces joined by Lua's `..`.
    call = lua[lua.index("string.format(") : lua.index("uid % users, uid, uid)")]
    template = "".join(piece for piece in call.split("'")[1::2])
    uid = 50_000_000_123
    assert servers.place_bet_body(uid) == (template % (uid % servers.USERS, uid, uid)).encode()


def test_no_wrk_run_resends_the_bets_of_an_earlier_run_of_any_process() -> None:
    servers = benchmark("servers")
    first = servers.first_uid()
    time.sleep(0.01)
    # Ten milliseconds later, ten thousand uids higher: room for a run placing a million a second.
    assert servers.first_uid() >= first + 10_000
    later = subprocess.run(
        [sys.executable, "-c", "import servers; print(servers.first_uid())"],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(later.stdout) > first
    # Every uid a run sends stays exact in the wrk script's Lua numbers (doubles).
    assert first + 10**9 < 2**53


def test_cli_start_compares_each_command_with_its_baseline(tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "cli_start.py"), "--rounds", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert set(json.loads(out.read_text())) == {"help", "balance"}
    assert "ratio" in done.stdout


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_every_ablation_switch_reaches_the_mechanism_it_turns_off() -> None:
    """Each mechanism the ablation switches off is still where the switch replaces it."""
    ablation = benchmark("ablation")
    for name, off, _, _ in ablation.MECHANISMS:
        done = subprocess.run(
            [sys.executable, "-c", "import sitecustomize"],
            env={**os.environ, **off, "PYTHONPATH": str(ablation.HOOKS)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{name}: {done.stderr[-2000:]}"


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_serve_start_reports_the_time_to_health_and_the_busy_port_refusal(tmp_path: Path) -> None:
    out = tmp_path / "serve.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "serve_start.py"), "--rounds", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["ready_s"] > 0
    assert figures["busy_port_exit"] == 1  # the second server refused the port, as it should
    assert "ready /health" in done.stdout


def test_the_benchmarks_give_postgres_the_settings_the_store_page_recommends() -> None:
    page = (BENCHMARKS.parent / "docs/operations/choosing-a-store.md").read_text()
    block = page.split("```conf\n", 1)[1].split("```", 1)[0]
    recommended = {
        name.strip(): value.split("#", 1)[0].strip()
        for name, value in (line.split("=", 1) for line in block.splitlines() if "=" in line)
    }
    assert recommended == benchmark("databases").POSTGRES_SETTINGS


def test_the_benchmarks_postgres_runs_with_those_settings_and_stops_when_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The embedded server (not one of LEDGER_TEST_POSTGRES_URL, used as it is): the settings
    take a restart, and the server that restart started is the one stopped after."""
    import psycopg

    monkeypatch.delenv("LEDGER_TEST_POSTGRES_URL", raising=False)

    databases = benchmark("databases")
    with databases.postgres_database() as url, psycopg.connect(url.replace("+psycopg", "")) as c:
        shown = {
            name: c.execute(f"SHOW {name}").fetchall()[0][0] for name in databases.POSTGRES_SETTINGS
        }
        directory = c.execute("SHOW data_directory").fetchall()[0][0]
        pid = int((Path(directory) / "postmaster.pid").read_text().split()[0])
    assert shown == databases.POSTGRES_SETTINGS
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the benchmark's Postgres (pid {pid}) still runs")


def test_each_ratio_is_against_an_echo_run_beside_it_which_goes_first_alternating(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = benchmark("run")
    order: list[str] = []

    def echo(seconds: int) -> dict[str, float]:
        order.append("echo")
        return {"rps": 1000.0, "p99_us": 2000.0, "server_cpu_us_per_request": 100.0}

    def ledger(db: str, seconds: int, **options: object) -> dict[str, object]:
        order.append("ledger")
        bet = {"rps": 600.0, "p99_us": 2400.0, "server_cpu_us_per_request": 300.0}
        return {"workers": 1, "place_bet": bet}

    monkeypatch.setattr(run, "bench_echo", echo)
    monkeypatch.setattr(run, "bench_http", ledger)
    options = {"hot": False, "workers": 1, "limits": False}
    first = run.http_round("db", 1, echo_first=True, **options)
    second = run.http_round("db", 1, echo_first=False, **options)
    assert order == ["echo", "ledger", "ledger", "echo"]
    for figure in (first, second):
        assert (figure["ratio_throughput"], figure["ratio_p99"], figure["ratio_cpu"]) == (
            0.6,
            1.2,
            3.0,
        )


def test_a_figure_is_its_median_round_whole_and_the_table_gives_every_round(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = benchmark("report")

    def round_(ratio: float, echo_rps: float) -> dict[str, object]:
        bet = {
            "rps": ratio * echo_rps,
            "p50_us": 1000.0,
            "p99_us": 3000.0,
            "server_cpu_us_per_request": 400.0,
            "loop_cpu_us_per_request": 200.0,
            "machine_idle_share": 0.1,
        }
        echo = {"rps": echo_rps, "p99_us": 2000.0, "server_cpu_us_per_request": 100.0}
        ratios = {"ratio_throughput": ratio, "ratio_p99": 1.5, "ratio_cpu": 4.0}
        return {"workers": 1, "place_bet": bet, "echo": echo, **ratios}

    runs = [round_(0.7, 9000.0), round_(0.5, 5000.0), round_(0.6, 7000.0)]
    median = report.median_run(runs, "ratio_throughput")
    assert median is runs[2]
    results = {
        "load_before": [0.0, 0.0, 0.0],
        "stores": {"sqlite": {"a_http_1": {**median, "runs": runs}}},
    }
    report.report(results, markdown=True)
    table = capsys.readouterr().out
    assert "4,200 vs 7,000 req/s = 0.60 (median of 3 rounds: 0.70, 0.50, 0.60)" in table
    assert "7,000 req/s (5,000 to 9,000)" in table
