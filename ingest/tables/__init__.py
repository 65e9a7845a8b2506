"""Tables → structured business records (invoices, credit notes, orders, catalog items), pure.

One job per module, bottom to top: `values` (exact Decimals, currencies, dates), `headers`
(column header → canonical field), `rows` (a data row read through the mapping; review issues),
`parsed` (the validated record and its `BusinessRecord` artifact), `transactions` and `catalog`
(record building), `reader` (`records_from_table`: one table in, records and issues out).
"""
