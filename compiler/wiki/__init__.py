"""The LLM-owned wiki: immutable sources (raw/), the pages agents write (wiki/), and the tooling that
keeps them navigable (index.md, log.md) and honest (lint). docs/wiki.md describes the pattern."""
