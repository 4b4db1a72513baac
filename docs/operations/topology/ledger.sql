-- The ledger's role and database, created once on the primary as a superuser.
CREATE ROLE ledger LOGIN PASSWORD 'change-me';
CREATE DATABASE ledger OWNER ledger;
-- What the ledger otherwise sends in `options`, which pgbouncer drops: its timeouts and the room
-- for a huge close's temporary tables, on the role.
ALTER ROLE ledger SET lock_timeout = '10s';
ALTER ROLE ledger SET statement_timeout = '110s';
ALTER ROLE ledger SET temp_buffers = '512MB';
