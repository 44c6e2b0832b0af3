"""Proctor's own database backends (Django loads a backend by its package: ``<ENGINE>.base``)."""
