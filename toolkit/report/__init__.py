"""What a listing and the logs say about a checkpoint: the file-level report and the batch
timeline.
"""
