"""Reading a journal back: the run summary, the run index and exports.

These are what the journal service *and* the CLI (``runplane journal verify``, ``runplane runs
list|show``) both use, so they live in the library, not in ``services.journal``: the CLI must
not import a service, and the service and the CLI must run the very same fold so they cannot
disagree about a run. The chain verifier they share is ``runplane.core.verify`` (pure, below
this package, as a recording's check and the test Driver use it too).

Import the submodules:

- ``runplane.journal.summary``: a run's summary as a pure fold over its audit records.
- ``runplane.journal.index``: the Redis run index built from those summaries (imports redis,
  which is why nothing is re-exported here: the pure folds stay cheap to import).
"""
