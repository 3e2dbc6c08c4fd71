"""Who wrote a record: Ed25519 signatures, below ``runplane.journal`` and ``runplane.kafka``.

- ``runplane.signing.admission``: an emitter's signature over an AdmissionRequest record
  (headers over its key and value bytes), the emitters registry, ``SigningKey``.
- ``runplane.signing.journal``: a chain writer's signature over a journal record's value
  (the ``runplane-sig`` header), the writers' ``Signer`` and the readers' ``Keyring``.

Import the submodules; nothing is re-exported here (one import path per name). Both are pure:
keys in, bytes out. Who holds which key is each service's settings' business; the shared loop
takes the journal signer in its configuration (``runplane.kafka.loop.LoopConfig``).
"""
