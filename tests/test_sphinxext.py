"""posbias.book.sphinxext: a figure's alt text is written from its caption, never its file path (issue 98)."""
from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

from posbias.book.sphinxext import _figure_alt_texts, figure_alt, plain_math


def _figure(caption: list[nodes.Node], **image: str) -> tuple[nodes.document, nodes.image]:
    doc = new_document("<test>", get_default_settings(Parser))
    img = nodes.image(uri="../../_images/4f0c.png", **image)
    doc += nodes.figure("", img, nodes.caption("", "", *caption))
    return doc, img


def test_a_glued_figure_gets_its_captions_first_sentence_with_its_math_in_words():
    doc, img = _figure([nodes.Text("Accuracy gaps "), nodes.math("", r"\mathrm{acc}(\mathrm{IC}_{a,b})"),
                        nodes.Text(" of networks trained at the paper's settings (mean ± SE). Left: x.")])
    _figure_alt_texts(None, doc, "x")
    assert img["alt"] == "Accuracy gaps acc(IC_a,b) of networks trained at the paper's settings (mean ± SE)."


def test_a_written_alt_text_stays_and_a_path_as_alt_text_is_replaced():
    doc, img = _figure([nodes.Text("The caption.")], alt="Three panels: the pull toward token 1.")
    _figure_alt_texts(None, doc, "x")
    assert img["alt"] == "Three panels: the pull toward token 1."
    for path in ("../../_images/4f0c.png", "figures/wu-fig-2.svg"):
        doc, img = _figure([nodes.Text("The caption.")], alt=path)
        _figure_alt_texts(None, doc, "x")
        assert img["alt"] == "The caption."


def test_an_image_without_a_caption_is_left_alone():
    doc = new_document("<test>", get_default_settings(Parser))
    img = nodes.image(uri="a.png")
    doc += nodes.figure("", img)
    _figure_alt_texts(None, doc, "x")
    assert "alt" not in img


def test_the_first_sentence_takes_the_second_when_it_is_short():
    assert figure_alt("Wu et al., Figure 2, reproduced. Accuracy gaps of networks (2 layers). Left: x.") == (
        "Wu et al., Figure 2, reproduced. Accuracy gaps of networks (2 layers).")
    long = "Accuracy against the slot of the answer (burstiness 1, no duplicate), mean over seeds."
    assert figure_alt(long + " Left: x.") == long
    assert figure_alt("Mass at 0.5 and e.g. layer 3 of  the\nstack") == "Mass at 0.5 and e.g. layer 3 of the stack"


def test_tex_is_said_in_words():
    gap = r"\mathrm{acc}(\mathrm{IC}_{a,b}) - \mathrm{acc}(\mathrm{IC}_{b,a})"
    assert plain_math(gap) == "acc(IC_a,b) - acc(IC_b,a)"
    assert plain_math(r"\alpha_k > \epsilon") == "alpha_k > epsilon"
    assert plain_math(r"q\cdot k/\sqrt d") == "q cdot k/ sqrt d"


# ---------------------------------------------------------- glossary terms linked from their first use (issue 93)

def _page(*paragraphs: list[nodes.Node]) -> nodes.document:
    doc = new_document("<test>", get_default_settings(Parser))
    for kids in paragraphs:
        doc += nodes.paragraph("", "", *kids)
    return doc


TERMS = {"register": "glossary.html#term-register", "after Holm": "glossary.html#term-after-Holm",
         "retrieve": "glossary.html#term-retrieve", "U": "glossary.html#term-U", "unit": "glossary.html#term-unit"}


def _links(doc):
    return [(r.astext(), r["refuri"]) for r in doc.findall(nodes.reference)]


def test_the_first_use_of_each_term_is_linked_and_only_the_first():
    from posbias.book.sphinxext import link_terms

    doc = _page([nodes.Text("The Register judges claims after   Holm; the register again.")],
                [nodes.Text("Networks that retrieves nothing; a community of units; a U here, u there.")])
    done = link_terms(doc, TERMS)
    assert sorted(done) == sorted(TERMS)
    assert _links(doc) == [("Register", TERMS["register"]), ("after   Holm", TERMS["after Holm"]),
                           ("retrieves", TERMS["retrieve"]), ("units", TERMS["unit"]), ("U", TERMS["U"])]
    assert doc.astext().count("register again") == 1                          # the text itself is unchanged
    assert "community" in doc.astext() and "Networks that retrieves nothing" in doc.astext()


def test_terms_in_code_math_headings_links_and_cells_are_never_linked():
    from posbias.book.sphinxext import link_terms

    doc = new_document("<test>", get_default_settings(Parser))
    doc += nodes.title("", "The register")
    doc += nodes.paragraph("", "", nodes.literal("", "register"), nodes.math("", "U"))
    doc += nodes.container("", nodes.paragraph("", "", nodes.Text("a register in a cell")), classes=["cell_output"])
    doc += nodes.paragraph("", "", nodes.reference("", "the register", refuri="elsewhere.html"))
    assert link_terms(doc, {"register": TERMS["register"], "U": TERMS["U"]}) == []
    doc += nodes.paragraph("", "", nodes.Text("and the register in prose"))
    assert link_terms(doc, {"register": TERMS["register"]}) == ["register"]


def test_a_term_the_page_already_links_is_left_alone_and_words_containing_a_term_are_not_it():
    from posbias.book.sphinxext import link_terms

    doc = _page([nodes.reference("", "register", refuri="glossary.html#term-register"),
                 nodes.Text(" and later the register; reunite, retrieval, unitary, U-shaped.")])
    assert link_terms(doc, TERMS) == []
    assert len(_links(doc)) == 1
