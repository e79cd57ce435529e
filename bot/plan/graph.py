"""The story dependency graph: cycles, batches, dependents, chain length.

Every function is deterministic: ties are broken by the order of the stories in the
PRD and of the ids in each `depends_on` list.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from bot.errors import PlanValidationError
from bot.plan.model import PRD, Story


def _edges(stories: Sequence[Story]) -> dict[str, list[str]]:
    """Map each id to its known dependencies, in listed order, without repeats."""
    ids = {s.id for s in stories}
    edges: dict[str, list[str]] = {}
    for story in stories:
        deps = edges.setdefault(story.id, [])
        for dep in story.depends_on:
            if dep in ids and dep not in deps:
                deps.append(dep)
    return edges


def _reachable(edges: dict[str, list[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(edges[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges[node])
    return seen


def _cycle_through(edges: dict[str, list[str]], start: str, members: set[str]) -> list[str]:
    """The shortest cycle from `start` back to itself inside `members`, first node repeated."""
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for dep in edges[node]:
            if dep == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if dep in members and dep not in parent:
                parent[dep] = node
                queue.append(dep)
    raise AssertionError(f"{start} is not on a cycle")  # pragma: no cover


def find_cycles(stories: Sequence[Story]) -> list[list[str]]:
    """One cycle per tangle of mutually dependent stories, each as ids with the first repeated."""
    edges = _edges(stories)
    reach = {node: _reachable(edges, node) for node in edges}
    placed: set[str] = set()
    cycles: list[list[str]] = []
    for node in edges:  # PRD order
        if node in placed or node not in reach[node]:
            continue
        members = {other for other in reach[node] if node in reach[other]}
        placed |= members
        cycles.append(_cycle_through(edges, node, members))
    return cycles


def find_cycle(stories: Sequence[Story]) -> list[str] | None:
    """The first dependency cycle, e.g. ``[A, B, A]``; None if the graph is acyclic."""
    cycles = find_cycles(stories)
    return cycles[0] if cycles else None


def format_cycle(cycle: Sequence[str]) -> str:
    """The problem line for a cycle."""
    return "dependency cycle: " + " → ".join(cycle)


def _and_list(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def dependency_problems(stories: Sequence[Story]) -> list[str]:
    """Duplicate ids, unknown dependencies and cycles, one line each."""
    problems: list[str] = []
    positions: dict[str, list[int]] = {}
    for index, story in enumerate(stories):
        positions.setdefault(story.id, []).append(index)
    for story_id, where in positions.items():
        if len(where) > 1:
            places = _and_list([f"stories[{i}]" for i in where])
            problems.append(f"duplicate story id {story_id} ({places})")
    for story in stories:
        for dep in dict.fromkeys(story.depends_on):
            if dep not in positions:
                problems.append(f"{story.id} depends on unknown story {dep}")
    problems.extend(format_cycle(cycle) for cycle in find_cycles(stories))
    return problems


def compute_batches(prd: PRD) -> list[list[str]]:
    """Group story ids in levels: a story's batch comes after the batches of all its dependencies.

    Batch 1 holds the stories without dependencies; inside a batch the PRD order is kept.
    Raises PlanValidationError on duplicate ids, unknown dependencies or a cycle.
    """
    problems = dependency_problems(prd.stories)
    if problems:
        raise PlanValidationError("the plan's dependencies cannot be ordered", problems)
    done: set[str] = set()
    remaining = list(prd.stories)
    batches: list[list[str]] = []
    while remaining:
        batch = [s.id for s in remaining if all(dep in done for dep in s.depends_on)]
        batches.append(batch)
        done.update(batch)
        remaining = [s for s in remaining if s.id not in done]
    return batches


def batch_of(prd: PRD) -> dict[str, int]:
    """Map each story id to its 1-based batch number."""
    return {sid: number for number, batch in enumerate(compute_batches(prd), start=1) for sid in batch}


def transitive_dependents(prd: PRD, story_id: str) -> set[str]:
    """Ids of the stories that depend on `story_id`, directly or not (KeyError if unknown)."""
    prd.story(story_id)
    dependents: dict[str, list[str]] = {}
    for story in prd.stories:
        for dep in story.depends_on:
            dependents.setdefault(dep, []).append(story.id)
    found: set[str] = set()
    todo = [story_id]
    while todo:
        for child in dependents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    found.discard(story_id)
    return found


def longest_chain(prd: PRD) -> int:
    """Number of stories on the longest dependency chain (0 for no stories).

    Raises PlanValidationError like :func:`compute_batches`.
    """
    problems = dependency_problems(prd.stories)
    if problems:
        raise PlanValidationError("the plan's dependencies cannot be ordered", problems)
    edges = _edges(prd.stories)
    length: dict[str, int] = {}
    for root in edges:
        stack = [root]
        while stack:
            node = stack[-1]
            if node in length:
                stack.pop()
                continue
            pending = [dep for dep in edges[node] if dep not in length]
            if pending:
                stack.extend(pending)
            else:
                length[node] = 1 + max((length[dep] for dep in edges[node]), default=0)
                stack.pop()
    return max(length.values(), default=0)
