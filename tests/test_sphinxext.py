"""posbias.sphinxext: a figure's alt text is written from its caption, never its file path (issue 98)."""
from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

from posbias.sphinxext import _figure_alt_texts, figure_alt, plain_math


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
