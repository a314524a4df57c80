"""Shipped lock libraries wrapped as protocol clients (clients/py-*); nothing shared yet."""
