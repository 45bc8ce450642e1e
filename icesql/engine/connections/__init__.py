"""How icesql reaches a store, a catalog, a broker or a schema registry: credentials, object stores,
catalogs, Kafka settings, the registry's client, library failures turned into one line, VALIDATE.
"""
