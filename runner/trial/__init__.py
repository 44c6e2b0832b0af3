"""One trial, start to finish, without the database: its spec, its agent session, and executing
it (sandbox, source, prepare, conversation, checks, outcome) through a recorder."""
