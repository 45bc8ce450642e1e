"""What a sink reads: relations by kind (FILES, KAFKA, GENERATOR), the kind registry, the record guard,
decoding.
"""
