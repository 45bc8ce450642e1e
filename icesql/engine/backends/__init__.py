"""Where a sink's micro-batches run: on Spark (classic or Connect) or in this process; the checkpoint
both share.
"""
