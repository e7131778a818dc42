"""The resumable frame: checkpointed chunks, step records in the work folder, and the steps runner
the corpus methods share."""
