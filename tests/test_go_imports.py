"""``engine.go_imports``: after an imported Go package's dot, only exported names, the package's
most used first."""

import json

import pytest

from engine.go_imports import (MEMBERS_FILE, imported_packages, package_at, package_members,
                               package_name)
from engine.imports import load_module_members
from engine.predictor import Predictor


@pytest.mark.parametrize("path, name", [
    ("fmt", "fmt"),
    ("net/http", "http"),
    ("github.com/urfave/cli/v2", "cli"),
    ("gopkg.in/yaml.v3", "yaml"),
    ("github.com/mattn/go-isatty", "isatty"),
    ("github.com/pelletier/go-toml", "toml"),
    ("github.com/foo/bar-go", "bar"),
    ("github.com/foo/some-pkg", "some_pkg"),
    ("k8s.io/api/core/v1", "v1"),  # v1 is no major-version suffix: the package is named v1
    ("github.com/x/y/v10", "y"),
    ("", None),
    ("example.com/123", None),
])
def test_package_name(path, name):
    assert package_name(path) == name


def test_imported_packages_reads_blocks_single_imports_and_aliases():
    head = ('// Package x does things.\npackage x\n\n'
            'import "os"\n'
            'import str "strings"\n'
            'import (\n'
            '\t"fmt" // printing\n'
            '\t/* the web */ "net/http"\n'
            '\tjww "github.com/spf13/jwalterweatherman"\n'
            '\t. "github.com/onsi/gomega"\n'
            '\t_ "embed"\n'
            ')\n\nfunc f() {}\n')
    assert imported_packages(head) == {"os": "os", "str": "strings", "fmt": "fmt", "http": "net/http",
                                       "jww": "github.com/spf13/jwalterweatherman"}


@pytest.mark.parametrize("head, want", [
    ('import (\n\t"fmt" // printing (stdout)\n\t"os"\n)\n', {"fmt": "fmt", "os": "os"}),
    ('import ("fmt"; "os")\n', {"fmt": "fmt", "os": "os"}),
    ('/*\nimport "os"\n*/\nimport "fmt"\n', {"fmt": "fmt"}),
    ('import "C"\nimport "unsafe"\n', {"unsafe": "unsafe"}),  # cgo's C has lower-case names
])
def test_imported_packages_edge_cases(head, want):
    assert imported_packages("package p\n\n" + head) == want


GO = 'package main\n\nimport (\n\t"fmt"\n\t"net/url"\n\t"os"\n)\n\nfunc run(s string) error {\n\t'


def test_package_at_an_imported_packages_dot_only():
    assert package_at(GO + "os.") == ("os", "os")
    assert package_at(GO + "x := fmt.") == ("fmt", "fmt")
    assert package_at(GO + "os") is None  # no dot yet
    assert package_at(GO + "parts.") is None  # a variable, not a package
    assert package_at(GO + "x.os.") is None  # a field named os
    assert package_at("package main\n\nfunc f() {\n\tos.") is None  # nothing imported


@pytest.mark.parametrize("shadow", ["url := parse(s)\n\t", "u, url := a, b\n\t", "var url string\n\t",
                                    "x, url := a, b\n\t", "var (\n\t\turl = &myURL{}\n\t)\n\t",
                                    "for _, url := range urls {\n\t\t", "f(url)\n\t"])
def test_a_variable_that_shadows_the_package_is_not_the_package(shadow):
    assert package_at(GO + shadow + "url.") is None
    assert package_at(GO + "url.") == ("url", "net/url")


@pytest.mark.parametrize("signature", ["run(url string)", "run(url, base *myURL)", "run(\n\turl *myURL,\n\tn int,\n)",
                                       "(url *myURL) run()"])
def test_a_parameter_that_shadows_the_package_is_not_the_package(signature):
    assert package_at(GO.replace("run(s string)", signature) + "url.") is None


@pytest.mark.parametrize("line", ['withServer("http://localhost:8080/", func(url link) {\n\t\t',
                                  'base := "https://x/"; url := link{}\n\t', "r := '/'; url := link{}\n\t"])
def test_a_local_after_a_string_with_slashes_still_shadows(line):
    assert package_at(GO + line + "url.") is None


def test_comments_strings_and_qualified_uses_do_not_shadow():
    body = '// the url of the page\n\tx := "url"\n\ty := url.Parse\n\tz := page.url\n\t'
    assert package_at(GO + body + "url.") == ("url", "net/url")


def test_package_members_counts_exported_uses_of_packages_two_projects_import():
    a = 'package a\n\nimport (\n\t"strings"\n\t"example.com/a/internal"\n)\n\n' \
        'func f(s string) bool {\n\t// strings.Ignored in a comment\n\treturn strings.HasPrefix(s, "x") || ' \
        'strings.HasPrefix(s, "y") && strings.unexported && internal.Thing\n}\n'
    b = 'package b\n\nimport "strings"\n\nfunc g(s string) []string { return strings.Split(s, ",") }\n' \
        'func h(s string) bool { return strings.HasPrefix(s, "z") }\n'
    got = package_members([("a", a), ("b", b)], min_count=2)
    assert got == {"members": {"strings": [["HasPrefix", 3]]}}  # Split once; internal: one project
    got = package_members([("a", a), ("b", b)], min_count=1)
    assert got["members"]["strings"] == [["HasPrefix", 3], ["Split", 1]]
    assert got["members"]["example.com/a/internal"] == [["Thing", 1]]


def test_shipped_table_loads_and_knows_the_standard_library():
    table = load_module_members(Predictor.load().folder, MEMBERS_FILE)
    members = table["members"]
    assert {"Errorf", "Sprintf", "Println"} <= {w for w, _ in members["fmt"]}
    assert {"Getenv", "Exit"} <= {w for w, _ in members["os"]}
    assert all(w[0].isupper() for names in members.values() for w, _ in names)


@pytest.fixture(scope="module")
def predictor():
    return Predictor.load()


def _items(p, text, doc="file:///w/main.go"):
    p.reset()
    p.observe_document(doc, text, "go")
    return [c.text for c in p.predict(text, doc_id=doc, max_items=20) if c.kind != "line"]


def test_after_an_imported_package_only_exported_names_are_offered(predictor):
    text = GO + 'parts := strings.Split(s, ",")\n\tif len(parts) == 0 {\n\t\t'
    items = _items(predictor, text + "os.")
    assert items and all(w[0].isupper() for w in items), items
    assert "Exit" in items[:10] and "Getenv" in items[:10]
    assert _items(predictor, text + "fmt.")[0] in {"Errorf", "Sprintf"}
    # a variable's fields and methods may be unexported: no filter there
    lower = _items(predictor, text + "parts = append(parts, s)\n\t\tx := run.")
    assert any(w[0].islower() for w in lower)


def test_shadowed_package_name_gets_the_documents_words(predictor):
    text = GO + 'os := []string{s}\n\tn := len(os)\n\t_ = os.'
    assert any(w[0].islower() for w in _items(predictor, text))


def test_a_model_folder_without_the_table_still_filters(tmp_path, predictor):
    for f in predictor.folder.iterdir():
        if f.name != MEMBERS_FILE:
            (tmp_path / f.name).symlink_to(f)
    p = Predictor.load(tmp_path)
    items = _items(p, GO + "os.")
    assert items and all(w[0].isupper() for w in items)
    (tmp_path / MEMBERS_FILE).write_text(json.dumps({"members": {"os": [["Getenv", "x"]]}}))
    p2 = Predictor.load(tmp_path)
    assert all(w[0].isupper() for w in _items(p2, GO + "os."))  # a bad table is ignored, logged
