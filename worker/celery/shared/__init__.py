"""What both sides of Celery agree on: the app and its queues, broker faults, the wire format, where
results live, the blob store, and run images' chunk format and names."""
