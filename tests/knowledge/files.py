"""Real documents in every format, made with the usual libraries (fpdf2, python-docx,
openpyxl, python-pptx, EbookLib) from real text: topics of the Python language reference in
`tests/data/knowledge/python-reference/` (PSF-2.0, see tests/data/README.md), with one planted
fact per file where a person would put it — a PDF page, a table row, a slide, a sheet.

Used by the format tests, the chat test and `bench/knowledge.py`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "knowledge" / "python-reference"


def topic(name: str, chars: int = 2400) -> str:
    """The opening of a reference topic, cut at a paragraph."""
    text = (DATA / f"{name}.txt").read_text()
    cut = text.rfind("\n\n", 0, chars)
    return text[: cut if cut > 0 else chars].strip()


@dataclass(frozen=True)
class Planted:
    filename: str
    question: str
    answer: str
    """A passage the answering chunk contains."""
    heading: str
    """What the citation's heading path contains (page, slide, sheet, section)."""
    make: Callable[[], bytes]


def _latin1(text: str) -> str:
    return text.encode("latin-1", "replace").decode("latin-1")


def pdf(pages: list[str]) -> bytes:
    from fpdf import FPDF

    document = FPDF()
    document.set_title("Harbour handbook")
    for text in pages:
        document.add_page()
        document.set_font("helvetica", size=10)
        document.multi_cell(0, 5, _latin1(text))
    return bytes(document.output())


def scanned_pdf() -> bytes:
    """A page that is only a picture (no text layer), as a scanner makes."""
    from fpdf import FPDF
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (400, 120), "white")
    ImageDraw.Draw(image).text((10, 50), "A scanned page: only pixels", fill="black")
    document = FPDF()
    document.add_page()
    document.image(image, x=10, y=10, w=180)
    return bytes(document.output())


def docx(title: str, sections: list[tuple[str, str]], table: list[list[str]]) -> bytes:
    import docx as python_docx

    document = python_docx.Document()
    document.add_heading(title, level=1)
    for heading, body in sections:
        document.add_heading(heading, level=2)
        for paragraph in body.split("\n\n"):
            document.add_paragraph(" ".join(paragraph.split()))
    document.add_heading("Fees", level=2)
    grid = document.add_table(rows=len(table), cols=len(table[0]))
    for r, row in enumerate(table):
        for c, value in enumerate(row):
            grid.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def xlsx(sheets: dict[str, list[list[object]]]) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def pptx(slides: list[tuple[str, str]], table_slide: tuple[str, list[list[str]]]) -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    for title, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    title, rows = table_slide
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = title
    shape = slide.shapes.add_table(
        len(rows), len(rows[0]), Inches(1), Inches(2), Inches(8), Inches(2)
    )
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value
    slide.notes_slide.notes_text_frame.text = "Speaker notes: check the winter timetable."
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def epub(title: str, chapters: list[tuple[str, str]]) -> bytes:
    from ebooklib import epub as ebooklib_epub

    book = ebooklib_epub.EpubBook()
    book.set_identifier("quiver-test-book")
    book.set_title(title)
    book.set_language("en")
    items = []
    for number, (heading, body) in enumerate(chapters, start=1):
        chapter = ebooklib_epub.EpubHtml(title=heading, file_name=f"c{number}.xhtml", lang="en")
        paragraphs = "".join(f"<p>{p}</p>" for p in body.split("\n\n"))
        chapter.content = f"<h1>{heading}</h1>{paragraphs}"
        book.add_item(chapter)
        items.append(chapter)
    book.toc = tuple(items)
    book.add_item(ebooklib_epub.EpubNcx())
    book.add_item(ebooklib_epub.EpubNav())
    book.spine = ["nav", *items]
    out = io.BytesIO()
    ebooklib_epub.write_epub(out, book)
    return out.getvalue()


def large_text(size: int, fact: str) -> bytes:
    """About `size` bytes of real text (every reference topic, numbered, over and over) with
    `fact` in the middle."""
    topics = sorted(p.stem for p in DATA.glob("*.txt"))
    parts: list[str] = []
    total = 0
    round_ = 0
    while total < size:
        round_ += 1
        for name in topics:
            part = (
                f"Volume {round_}: {name}\n{'=' * 20}\n\n{(DATA / f'{name}.txt').read_text()}\n\n"
            )
            parts.append(part)
            total += len(part)
    parts.insert(len(parts) // 2, f"Volume 0: harbour\n{'=' * 20}\n\n{fact}\n\n")
    return "".join(parts).encode()


def large_pdf(size: int, fact: str) -> bytes:
    """A PDF of about `size` bytes as scanners and cameras make them: a few pages of text
    (the fact on the second) and one large photo-like image that carries the bytes."""
    import os

    from fpdf import FPDF
    from PIL import Image

    side = int((size / 3) ** 0.5)
    noise = Image.frombytes("RGB", (side, side), os.urandom(side * side * 3))
    document = FPDF()
    for text in (topic("try", 1500), f"Harbour office\n\n{fact}", topic("with", 1500)):
        document.add_page()
        document.set_font("helvetica", size=10)
        document.multi_cell(0, 5, _latin1(text))
    document.add_page()
    document.image(noise, x=10, y=10, w=180)
    return bytes(document.output())


def _csv(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue().encode()


PLANTED: list[Planted] = [
    Planted(
        "handbook.pdf",
        "In which year was the Skerry Point lighthouse automated?",
        "automated in 1987",
        "Page 3",
        lambda: pdf(
            [
                topic("try", 1500),
                topic("with", 1500),
                "Lighthouses\n\nThe lighthouse on Skerry Point was automated in 1987; its "
                "lamp is now checked once a month.\n\n" + topic("for", 1200),
                topic("while", 1500),
            ]
        ),
    ),
    Planted(
        "harbour.docx",
        "How much is the harbour fee per night?",
        "42 crowns",
        "Harbour rules > Fees",
        lambda: docx(
            "Harbour rules",
            [("Exceptions", topic("exceptions")), ("Imports", topic("import"))],
            [["Item", "Price"], ["Mooring", "15 crowns"], ["Harbour fee", "42 crowns per night"]],
        ),
    ),
    Planted(
        "tides.xlsx",
        "How high is the spring tide at the north quay?",
        "5.8",
        "Sheet: Tides",
        lambda: xlsx(
            {
                "Keywords": [["Statement", "Summary"]]
                + [[k, topic(k, 300).splitlines()[0]] for k in ("assert", "for", "while", "try")],
                "Tides": [
                    ["Place", "Tide", "Height (m)"],
                    ["South quay", "neap", 2.1],
                    ["North quay", "spring", 5.8],
                    ["Old pier", "spring", 4.4],
                ],
            }
        ),
    ),
    Planted(
        "ferries.pptx",
        "When does the last ferry leave?",
        "22:15",
        "Slide 3: Ferry timetable",
        lambda: pptx(
            [
                ("The assert statement", topic("assert", 500)),
                ("The for statement", topic("for", 500)),
            ],
            (
                "Ferry timetable",
                [["Ferry", "Leaves"], ["First ferry", "06:40"], ["Last ferry", "22:15"]],
            ),
        ),
    ),
    Planted(
        "keeper.epub",
        "What is the name of the lighthouse keeper's dog?",
        "Biscuit",
        "The keeper",
        lambda: epub(
            "Tales of the point",
            [
                ("Loops", topic("while", 1500)),
                ("The keeper", "The keeper's dog is called Biscuit and sleeps by the lamp."),
            ],
        ),
    ),
    Planted(
        "moorings.csv",
        "Which berth is reserved for the lifeboat?",
        "Berth 7",
        "",
        lambda: _csv(
            [["Berth", "Holder"], ["Berth 1", "Fishing co-op"], ["Berth 7", "Lifeboat (reserved)"]]
        ),
    ),
    Planted(
        "signals.json",
        "What does a green flare signal?",
        "all clear",
        "flares",
        lambda: json.dumps(
            {
                "flares": [
                    {"colour": "red", "meaning": "distress"},
                    {"colour": "green", "meaning": "all clear, return to harbour"},
                ],
                "reference": topic("raise", 600),
            }
        ).encode(),
    ),
    Planted(
        "notes.html",
        "Where is the spare lamp kept?",
        "in the boathouse loft",
        "Keeper's notes > Spares",
        lambda: (
            "<html><head><title>Keeper's notes</title></head><body><h2>Loops</h2>"
            f"<p>{topic('for', 1200)}</p><h2>Spares</h2><p>The spare lamp is kept in the "
            "boathouse loft, behind the oars.</p></body></html>"
        ).encode(),
    ),
    Planted(
        "logbook.md",
        "Who repaired the foghorn?",
        "Mira Holt",
        "Repairs",
        lambda: (
            f"# Logbook\n\n## Reference\n\n{topic('with', 1200)}\n\n## Repairs\n\n"
            "The foghorn was repaired by Mira Holt in March.\n"
        ).encode(),
    ),
    Planted(
        "radio.txt",
        "On which channel does the harbour radio listen?",
        "channel 16",
        'The "while" statement',
        lambda: (f"{topic('while', 1200)}\n\nThe harbour radio listens on channel 16.\n").encode(),
    ),
]
