"""Memory events and where they live: the journal, chunks from other machines, the manifest.

Reading, checking and replaying records; knows nothing of the memory model built from them.
"""
