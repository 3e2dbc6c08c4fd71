"""Reading a journal back: chain verification, the run summary and the run index.

These are what the journal service *and* the CLI (``runplane journal verify``, ``runplane runs
list|show``) both use, so they live in the library, not in ``services.journal``: the CLI must
not import a service, and the service and the CLI must run the very same fold so they cannot
disagree about a chain or a run.

Import the submodules:

- ``runplane.journal.verify``: the incremental chain checker, a pure fold over one session's
  journal records (``verify_records``, ``check``, ``Tip``, ``Finding``).
- ``runplane.journal.summary``: a run's summary as a pure fold over its audit records.
- ``runplane.journal.index``: the Redis run index built from those summaries (imports redis,
  which is why nothing is re-exported here: the pure folds stay cheap to import).
"""
