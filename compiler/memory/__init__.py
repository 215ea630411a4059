"""Agent memory: the model (decay, fold), input rules, resolve on write, recall, maintenance, engineering state.

Above events, index and embed; independent of notes.
"""
