"""What users read and see: text tables and JSON documents, annotated traces, figures.
"""
