"""The router's parts (used through `manifold.query.router`): `lexicon` (word lists), `tokens`
(question tokens, catalog name forms), `mentions` (anchors), `intents` (rule cues, classifier
blend), `constraints` (currency, statuses, topic)."""
