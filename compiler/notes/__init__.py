"""notes"""
