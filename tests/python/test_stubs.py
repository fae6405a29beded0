"""The type stubs (gridwarp/__init__.pyi) against the module: every public name is in both, each
function's parameters (names, kinds, defaults) are the same, Image's members are the same, and
every public function and member has a docstring."""
import ast
import inspect
import pathlib
import re

import gridwarp

STUB = pathlib.Path(gridwarp.__file__).with_name("__init__.pyi")


def stub_tree():
    return ast.parse(STUB.read_text())


def stub_parameters(function):
    """(name, kind, default as source text or None) of a stub's def, self left out."""
    arguments = function.args
    out = []
    positional = arguments.posonlyargs + arguments.args
    defaults = [None] * (len(positional) - len(arguments.defaults)) + [ast.unparse(d) for d in arguments.defaults]
    for argument, default in zip(positional, defaults):
        out.append((argument.arg, "positional", default))
    if arguments.vararg:
        out.append((arguments.vararg.arg, "*", None))
    for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
        out.append((argument.arg, "keyword", None if default is None else ast.unparse(default)))
    if arguments.kwarg:
        out.append((arguments.kwarg.arg, "**", None))
    return [p for p in out if p[0] != "self"]


def normalized(default):
    if default is None:
        return None
    try:
        return repr(ast.literal_eval(default))
    except ValueError:
        try:
            return repr(eval(default, {"__builtins__": {}}))  # arithmetic such as 2**34
        except Exception:
            return default


def runtime_parameters(function):
    """The same from the function itself: inspect for Python functions, the first line of a
    pybind11 docstring ("name(a: T, *, b: T = d) -> R") for compiled ones."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        kinds = {inspect.Parameter.POSITIONAL_ONLY: "positional", inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
                 inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.KEYWORD_ONLY: "keyword", inspect.Parameter.VAR_KEYWORD: "**"}
        return [(p.name, kinds[p.kind], None if p.default is inspect.Parameter.empty else repr(p.default))
                for p in signature.parameters.values() if p.name != "self"]
    first = function.__doc__.splitlines()[0]
    inside = re.match(r"^\w+\((.*)\) ->", first).group(1)
    parameters, kind, depth, current = [], "positional", 0, ""
    for character in inside + ",":
        if character in "[(":
            depth += 1
        elif character in "])":
            depth -= 1
        if character == "," and depth == 0:
            text = current.strip()
            current = ""
            if text == "*":
                kind = "keyword"
                continue
            if not text:
                continue
            name = text.split(":")[0].strip()
            default = text.split("=", 1)[1].strip() if "=" in text else None
            if name != "self":
                parameters.append((name, kind, normalized(default)))
            continue
        current += character
    return parameters


def test_every_public_name_is_in_the_stubs_and_the_module():
    tree = stub_tree()
    stubbed = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    stubbed |= {target.id for node in tree.body if isinstance(node, ast.AnnAssign) for target in [node.target]}
    public = set(gridwarp.__all__) | {"__version__"}
    assert public - stubbed == set(), "in the module, not the stubs"
    assert {name for name in stubbed if not name.startswith("_")} - public == set(), "in the stubs, not the module"


def test_every_function_has_the_stubs_parameters_and_a_docstring():
    for node in stub_tree().body:
        if not isinstance(node, ast.FunctionDef):
            continue
        function = getattr(gridwarp, node.name)
        assert function.__doc__, node.name
        ours = [(n, k, normalized(d)) for n, k, d in stub_parameters(node)]
        theirs = [(n, k, normalized(d)) for n, k, d in runtime_parameters(function)]
        assert ours == theirs, node.name


def test_image_members_match():
    (image,) = [node for node in stub_tree().body if isinstance(node, ast.ClassDef) and node.name == "Image"]
    stubbed = {node.name for node in image.body if isinstance(node, ast.FunctionDef)}
    runtime = {name for name in dir(gridwarp.Image) if not name.startswith("_")} | {"__init__"}
    assert stubbed == runtime
    for name in stubbed:
        member = getattr(gridwarp.Image, name)
        assert (member.__doc__ if not isinstance(member, property) else member.__doc__ or name in ("kind", "format", "dtype", "channels",
                                                                                                    "warnings")), name
    (init,) = [node for node in image.body if isinstance(node, ast.FunctionDef) and node.name == "__init__"]
    assert [p[0] for p in stub_parameters(init)] == [p[0] for p in runtime_parameters(gridwarp.Image.__init__)]
