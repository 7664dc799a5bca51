"""The exception tree drawn in ``zkconsumer/errors.py``'s docstring is the tree the classes form: every subclass of
``ZkConsumerError`` defined in zkconsumer or migrate is drawn once, under its first base class, with its further
base classes and (when not in ``zkconsumer.errors``) its module."""
import importlib
import pkgutil
import re

import migrate
import zkconsumer
from zkconsumer import errors
from zkconsumer.errors import ZkConsumerError

_LINE = re.compile(r"(?P<prefix>(?:[│ ]   )*(?:[├└]── )?)(?P<name>\w+)(?: \(also (?P<also>[\w, ]+)\))?"
                   r"(?:  in (?P<module>[\w.]+))?\Z")


def drawn_tree():
    """``{name: (parent name or None, [further bases], module)}`` from the docstring's drawing."""
    text = errors.__doc__
    block = text[text.index("::\n") + 3:].strip("\n").split("\n\n")[0]
    lines = [line[4:] for line in block.splitlines()]
    tree, stack = {}, []
    for line in lines:
        m = _LINE.match(line)
        assert m, "cannot read the drawing's line %r" % line
        depth = len(m.group("prefix")) // 4
        name = m.group("name")
        assert name not in tree, "%s is drawn twice" % name
        del stack[depth:]
        assert len(stack) == depth, "line %r is deeper than its parent" % line
        also = [b.strip() for b in m.group("also").split(",")] if m.group("also") else []
        tree[name] = (stack[-1] if stack else None, also, m.group("module") or "zkconsumer.errors")
        stack.append(name)
    return tree


def defined_errors():
    """Every subclass of ZkConsumerError defined in the zkconsumer and migrate packages (all modules imported)."""
    for pkg in (zkconsumer, migrate):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)
    found, todo = {}, [ZkConsumerError]
    while todo:
        cls = todo.pop()
        if cls.__module__.split(".")[0] in ("zkconsumer", "migrate"):
            found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


def test_the_drawing_is_the_class_tree():
    tree, classes = drawn_tree(), defined_errors()
    assert sorted(tree) == sorted(classes), "drawn but not defined: %s; defined but not drawn: %s" % (
        sorted(set(tree) - set(classes)), sorted(set(classes) - set(tree)))
    for name, cls in classes.items():
        parent, also, module = tree[name]
        bases = [b.__name__ for b in cls.__bases__]
        if cls is ZkConsumerError:
            assert parent is None and bases == ["Exception"]
            continue
        assert [parent] + also == bases, "%s: drawn under %s (also %s), its bases are %s" % (name, parent, also, bases)
        assert module == cls.__module__, "%s: drawn in %s, defined in %s" % (name, module, cls.__module__)


def test_the_drawing_is_read_whole():
    tree = drawn_tree()
    assert tree["ZkConsumerError"][0] is None
    assert tree["OffsetManagerUnavailableError"] == ("OffsetStoreError", ["ClusterUnavailableError"],
                                                     "zkconsumer.errors")
    assert tree["BackupFileError"] == ("OffsetsFileError", [], "migrate.backup")
