"""Django's SQLite backend with the database's folder made on first use (``base``)."""
