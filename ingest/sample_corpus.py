"""A deterministic, synthetic procurement corpus in every supported text format.

Used by the benchmark, the end-to-end tests and the quickstart. Given the same `seed` and
`size` it always writes the same files. The content is built so that every query route has
something to find: contracts with approved-vendor clauses (graph), catalogs and invoices with
line items (SQL, exact identifiers), and prose about calibration, delivery and returns (BM25 and
vector search).
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Callable
from decimal import Decimal
from email.message import EmailMessage
from pathlib import Path

COMPANIES = ["Company A", "Northwind Traders", "Contoso Manufacturing", "Fabrikam Industries"]
SUPPLIERS = ["Supplier Beta", "Supplier Gamma", "Acme Sensors Ltd", "Delta Controls GmbH", "Omega Valves Inc"]
GROUPS = ["Monitoring Products", "Control Modules", "Valves", "Cabling"]
PRODUCTS = [(f"PRD-{400 + i}", name, GROUPS[i % len(GROUPS)]) for i, name in enumerate([
    "pressure sensor", "temperature sensor", "flow meter", "control module", "relay board",
    "ball valve", "gate valve", "shielded cable", "signal cable", "vibration monitor",
    "humidity sensor", "PLC controller",
])]

_TOPICS = [
    ("Calibration", "The {p} must be calibrated every {n} months using a differential pressure "
     "calibration bench. Calibration certificates are kept for five years."),
    ("Delivery", "Deliveries of {p} units are scheduled within {n} working days of the purchase "
     "order. Late delivery triggers a penalty of {n} percent of the order value."),
    ("Returns", "Damaged goods may be returned within {n} days. The supplier replaces a defective "
     "{p} free of charge after inspection."),
    ("Warranty", "The {p} carries a warranty of {n} months covering manufacturing defects, "
     "excluding wear parts and damage caused by incorrect installation."),
    ("Safety", "Installers must isolate power before servicing the {p}. Lockout procedures apply "
     "to every site and are audited every {n} weeks."),
]


def _prose(rng: random.Random, sentences: int) -> str:
    out = []
    for _ in range(sentences):
        title, template = rng.choice(_TOPICS)
        out.append(template.format(p=rng.choice(PRODUCTS)[1], n=rng.randint(2, 30)))
    return " ".join(out)


def _contract(rng: random.Random, i: int) -> tuple[str, str]:
    company, supplier = rng.choice(COMPANIES), rng.choice(SUPPLIERS)
    year = 2025 + i % 2
    products = rng.sample(PRODUCTS, 3)
    lines = [
        f"# Supply agreement CTR-{year}-{i:04d}",
        "",
        f"{company} has approved {supplier} as an approved vendor from {year}-01-01 to {year}-12-31.",
        "",
        "## Scope",
        "",
        *[f"- {supplier} supplies {code}." for code, _, _ in products],
        *[f"- {code} belongs to the {group} product group." for code, _, group in products],
        "",
        "## Terms",
        "",
        f"1. {_prose(rng, 2)}",
        f"2. {_prose(rng, 2)}",
        "",
        "## Pricing",
        "",
        "| Product code | Description | Unit price | Currency |",
        "|---|---|---|---|",
        *[f"| {code} | {name} | {rng.randint(20, 900)}.{rng.randint(0, 99):02d} | EUR |" for code, name, _ in products],
    ]
    return f"contracts/ctr-{i:04d}.md", "\n".join(lines) + "\n"


def _invoice_csv(rng: random.Random, i: int) -> tuple[str, str]:
    supplier, company = rng.choice(SUPPLIERS), rng.choice(COMPANIES)
    number = f"INV-2026-{i:04d}"
    month = 1 + i % 12
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["Invoice No", "Date", "Supplier", "Customer", "Line", "Product code",
                     "Description", "Qty", "Unit price", "Amount", "Currency"])
    for line, (code, name, _) in enumerate(rng.sample(PRODUCTS, rng.randint(1, 4)), start=1):
        qty = rng.randint(1, 40)
        price = Decimal(rng.randint(500, 90000)) / 100
        writer.writerow([number, f"2026-{month:02d}-{1 + i % 28:02d}", supplier, company, line, code,
                         name, qty, f"{price:.2f}", f"{price * qty:.2f}", "EUR"])
    return f"invoices/inv-{i:04d}.csv", buf.getvalue()


def _orders_json(rng: random.Random, i: int) -> tuple[str, str]:
    rows = []
    for line, (code, name, _) in enumerate(rng.sample(PRODUCTS, rng.randint(1, 3)), start=1):
        qty = rng.randint(1, 20)
        price = Decimal(rng.randint(500, 50000)) / 100
        rows.append({"order_number": f"PO-{7000 + i}", "order_date": f"2026-{1 + i % 12:02d}-15",
                     "customer": rng.choice(COMPANIES), "line_no": line, "sku": code,
                     "description": name, "quantity": qty, "unit_price": f"{price:.2f}",
                     "amount": f"{price * qty:.2f}", "currency": "EUR"})
    return f"orders/po-{7000 + i}.json", json.dumps(rows, indent=1) + "\n"


def _manual_html(rng: random.Random, i: int) -> tuple[str, str]:
    code, name, group = rng.choice(PRODUCTS)
    body = "".join(
        f"<h2>{title}</h2><p>{template.format(p=name, n=rng.randint(2, 30))}</p>"
        for title, template in rng.sample(_TOPICS, 3)
    )
    html = (f"<html><head><title>{name} manual</title></head><body><h1>{name.title()} ({code})</h1>"
            f"<p>{code} belongs to the {group} product group.</p>{body}</body></html>")
    return f"manuals/manual-{i:04d}.html", html


def _note_txt(rng: random.Random, i: int) -> tuple[str, str]:
    return f"notes/note-{i:04d}.txt", f"Site visit note {i}\n\n{_prose(rng, 5)}\n"


def _email(rng: random.Random, i: int) -> tuple[str, bytes]:
    msg = EmailMessage()
    supplier = rng.choice(SUPPLIERS)
    msg["From"] = f"sales@{supplier.split()[0].lower()}.example"
    msg["To"] = "procurement@company-a.example"
    msg["Subject"] = f"Delivery update for PO-{7000 + i}"
    msg["Date"] = "Mon, 16 Mar 2026 09:30:00 +0000"
    msg.set_content(f"Hello,\n\n{_prose(rng, 3)}\n\nRegards,\n{supplier}\n")
    return f"mail/msg-{i:04d}.eml", bytes(msg)


_MAKERS: list[Callable[[random.Random, int], tuple[str, str | bytes]]] = [
    _contract, _invoice_csv, _orders_json, _manual_html, _note_txt, _email]


def write_corpus(root: Path, size: int, seed: int = 7) -> list[Path]:
    """Write `size` documents under `root` (mixed formats, round-robin) and return their paths."""
    rng = random.Random(seed)
    paths = []
    for i in range(size):
        rel, content = _MAKERS[i % len(_MAKERS)](rng, i)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        paths.append(path)
    return paths
