"""Checks the served OpenAPI document from a second language: Python's `re` and `jsonschema`.

    python3 validate_openapi.py DOCUMENT.json SAMPLES.json

DOCUMENT.json is what GET /openapi.json served. SAMPLES.json is a list of real answers of a running
server: {"path", "method", "status", "body", "valid"}; each body is validated against the schema
the document declares for that path, method and status (`valid` false: a body that must fail, so
that the check is seen to refuse). Prints one JSON object: the problems found and what was checked.
"""

import json
import re
import sys

from jsonschema import Draft202012Validator, FormatChecker

# What the schemas' own `pattern`s must avoid: constructs that Go's RE2 or Java read otherwise, or
# that mean something else in Python (`\d` takes any Unicode digit there).
NOT_PORTABLE = [
    ("lookaround", re.compile(r"\(\?<?[=!]")),
    ("a Unicode property class", re.compile(r"\\[pP]\{")),
    ("a back-reference", re.compile(r"\\[1-9]")),
    ("a shorthand class that differs between engines", re.compile(r"\\[dDwWsSbB]")),
    ("a \\u escape (RE2 has none)", re.compile(r"\\u")),
]


def walk(node, at="#"):
    """Every object of the document with its JSON pointer."""
    if isinstance(node, dict):
        yield at, node
        for key, value in node.items():
            yield from walk(value, f"{at}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{at}/{index}")


def main():
    with open(sys.argv[1], encoding="utf-8") as file:
        document = json.load(file)
    with open(sys.argv[2], encoding="utf-8") as file:
        samples = json.load(file)
    components = document.get("components", {})
    problems = []
    checked = {"patterns": 0, "portable": 0, "examples": 0, "samples": 0, "refused": 0}

    def validator(schema):
        # The document's components beside the schema, so that `#/components/...` resolves.
        return Draft202012Validator({**schema, "components": components}, format_checker=FormatChecker())

    def resolve(node):
        """A local `$ref` followed to what it names."""
        while isinstance(node, dict) and "$ref" in node and node["$ref"].startswith("#/"):
            target = document
            for key in node["$ref"][2:].split("/"):
                target = target[key]
            node = target
        return node

    def check(schema, value, at):
        try:
            errors = sorted(validator(schema).iter_errors(value), key=lambda e: list(e.path))
        except Exception as error:  # a pattern Python cannot compile fails the validation itself
            problems.append(f"{at}: the schema cannot be used: {type(error).__name__}: {error}")
            return False
        for error in errors[:3]:
            problems.append(f"{at}: {error.message[:200]} at {list(error.path)}")
        return not errors

    for at, node in walk(document):
        # Every `pattern` compiles in Python's re; a schema's own (not an x-openbook-checks entry,
        # which is ECMAScript for clients that apply the checks) is portable too.
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            try:
                re.compile(pattern)
                checked["patterns"] += 1
            except re.error as error:
                problems.append(f"{at}/pattern does not compile in Python: {error}")
            if "/x-openbook-checks/" not in at:
                checked["portable"] += 1
                for what, construct in NOT_PORTABLE:
                    if construct.search(pattern):
                        problems.append(f"{at}/pattern uses {what}: {pattern}")
        # A media type or a parameter: its schema and its named examples.
        if isinstance(node.get("schema"), dict) and isinstance(node.get("examples"), dict):
            for name, example in node["examples"].items():
                checked["examples"] += 1
                check(resolve(node["schema"]), resolve(example).get("value"), f"{at}/examples/{name}")
        # A schema: its examples (a list, in JSON Schema) and its default.
        if isinstance(node.get("examples"), list) and ("type" in node or "$ref" in node):
            for index, example in enumerate(node["examples"]):
                checked["examples"] += 1
                check(node, example, f"{at}/examples/{index}")
        if "default" in node and "type" in node:
            checked["examples"] += 1
            check(node, node["default"], f"{at}/default")

    for sample in samples:
        where = f"{sample['method'].upper()} {sample['path']} {sample['status']}"
        operation = document["paths"].get(sample["path"], {}).get(sample["method"])
        if operation is None:
            problems.append(f"{where}: no such operation in the document")
            continue
        response = resolve(operation["responses"].get(str(sample["status"])))
        if response is None:
            problems.append(f"{where}: the status is not declared")
            continue
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            problems.append(f"{where}: no JSON schema for a body")
            continue
        if sample.get("valid", True):
            checked["samples"] += 1
            check(resolve(schema), sample["body"], where)
        else:
            checked["refused"] += 1
            before = len(problems)
            if check(resolve(schema), sample["body"], where):
                problems.append(f"{where}: a body that must fail validated")
            else:
                del problems[before:]  # its errors are the expected outcome

    print(json.dumps({"problems": problems, "checked": checked}))


if __name__ == "__main__":
    main()
