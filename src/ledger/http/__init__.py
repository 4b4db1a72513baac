"""The standalone callback server: a Litestar app built by :func:`create_app`."""
