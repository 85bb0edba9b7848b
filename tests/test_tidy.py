"""posbias.book.tidy: the executed notebook as the book shows it: relative paths, check lines collapsed."""
from posbias.book import tidy
from posbias.storage.provenance import ROOT


def test_paths_in_the_repository_are_kept_relative_to_it_and_others_by_name(tmp_path):
    assert tidy.repo_relative(ROOT / "book" / "_executed" / "x" / "x.ipynb") == "book/_executed/x/x.ipynb"
    assert tidy.repo_relative(tmp_path / "elsewhere" / "x.ipynb") == "x.ipynb"


def test_cells_showing_only_check_lines_are_collapsed():
    import nbformat

    def cell(*texts):
        c = nbformat.v4.new_code_cell("x = 1")
        c.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": t, "text/plain": "<Markdown>"})
                     for t in texts]
        return c

    nb = nbformat.v4.new_notebook()
    nb.cells = [cell("{bdg-success}`PASS` `a`: ...", "{bdg-success}`PASS` `b`: ..."),
                cell("{bdg-success}`PASS` `c`: ...", "| a table |"),        # a check beside a table
                cell(), nbformat.v4.new_markdown_cell("{bdg-success}`PASS`")]
    assert tidy.collapse_checks(nb)
    assert nb.cells[0].metadata["tags"] == ["hide-output"]
    assert "tags" not in nb.cells[1].metadata and "tags" not in nb.cells[2].metadata
    assert not tidy.collapse_checks(nb)                                  # once is enough
