"""The Django project that serves and runs Proctor: settings, URLs, ASGI, the Celery app, the
channel layer, the database backend and the `proctor` command. Eval files never import it."""
