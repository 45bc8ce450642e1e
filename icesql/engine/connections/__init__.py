"""How icesql reaches a store, a catalog or a broker: credentials, object stores, catalogs, Kafka
settings, library failures turned into one line, VALIDATE.
"""
