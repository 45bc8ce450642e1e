"""KAFKA sources: topics read through confluent-kafka (librdkafka) as a Spark Python data source.

``connection`` (librdkafka configuration, VALIDATE), and the source itself (offsets, planning,
reading and decoding records) in the modules beside it.
"""
