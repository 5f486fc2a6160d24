"""MkDocs hooks (mkdocs.yml, `hooks:`): the reference pages that the code already knows are
generated from it at every build (kraftlab/reference_docs.py), never written by hand."""

from __future__ import annotations

from mkdocs.structure.files import File, Files

from kraftlab import reference_docs


def on_files(files: Files, config) -> Files:
    for path, markdown in reference_docs.pages().items():
        files.append(File.generated(config, path, content=markdown))
    return files
