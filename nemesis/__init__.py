"""Nemeses: faults injected into servers and clients, each verified and recorded."""
