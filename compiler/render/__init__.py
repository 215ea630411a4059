"""Generated pages: Jinja2 templates for note pages (catalog, backlinks, health) and memory pages.

The only package that imports jinja2.
"""
