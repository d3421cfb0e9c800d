"""A small real PDF for engram's corpus reader (tests/fixtures/corpus-pdf/memo.pdf): two pages
of text in a standard font, written by fpdf2 (PyPI), with a document title in its metadata.

    pip install fpdf2==2.8.1
    python tests/peers/make_pdf_fixture.py tests/fixtures/corpus-pdf/memo.pdf
"""

import datetime
import sys

from fpdf import FPDF

PAGES = [
    [
        "Gas Storage Review",
        "The quarterly gas storage review moves to Thursday, May 17, in room EB-3321.",
        "Sara Shackleton will present the Houston figures; please send your numbers",
        "to her by Tuesday.",
    ],
    [
        "Portland Desk",
        "The new trading desk in Portland opens on June 4. Tim Belden leads it,",
        "and the first hires are Chris Foster and Jeff Richter.",
    ],
]


def main(out):
    pdf = FPDF()
    pdf.set_title("Gas storage review memo")
    # A fixed date: the same bytes on every run.
    pdf.set_creation_date(datetime.datetime(2026, 12, 2, tzinfo=datetime.timezone.utc))
    for lines in PAGES:
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 14)
        pdf.cell(0, 10, lines[0], new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        for line in lines[1:]:
            pdf.cell(0, 7, line, new_x="LMARGIN", new_y="NEXT")
    pdf.output(out)


if __name__ == "__main__":
    main(sys.argv[1])
