"""The operation's shape (pipeline/operations.py): what its method and path say it does, and to
what, against a request's verb and object."""

from __future__ import annotations

import numpy as np
import pytest

from app.pipeline.hybrid import HybridRanker
from app.pipeline.operations import (
    OperationShapes,
    ShapeWeights,
    first_person,
    operation_shape,
    own_account,
    request_classes,
)
from app.tools.base import SearchHints, ToolDef


@pytest.mark.parametrize(
    ("method", "path", "classes", "resource"),
    [
        ("POST", "/v1/customers", {"create"}, "customer"),
        ("POST", "/v1/customers/{customer}", {"update"}, "customer"),
        ("GET", "/repos/{owner}/{repo}/pulls", {"read"}, "pull"),
        ("DELETE", "/repos/{owner}/{repo}", {"delete"}, "repo"),
        # a path that names its own verb: the method says nothing more
        ("POST", "/conversations.kick", {"delete"}, "conversat"),
        ("POST", "/chat.update", {"update"}, "chat"),
        ("POST", "/2010-04-01/Accounts/{AccountSid}/Messages.json", {"create"}, "messag"),
        ("POST", "/v1/invoices/{invoice}/void", {"delete"}, "invoic"),
        # a verb of its own in no class: the method's
        ("POST", "/v1/invoices/{invoice}/pay", {"create"}, "invoic"),
    ],
)
def test_operation_shape(method: str, path: str, classes: set[str], resource: str) -> None:
    assert operation_shape(method, path) == (frozenset(classes), resource)


@pytest.mark.parametrize(
    ("request_text", "classes"),
    [
        ("open a pull request", {"create"}),
        ("who follows me?", {"read"}),
        ("permanently remove the old repo", {"delete"}),
        ("rename the channel", {"update"}),
        ("make a new channel", {"create", "update"}),
        ("stop the deploy and publish the notes", {"delete", "create"}),
        ("the weather in Lisbon", set()),
        ("send the draft to the team", {"create"}),
        ("assign it to bob", {"update"}),
        ("unfollow that account and dismiss the alert", {"delete"}),
    ],
)
def test_request_classes(request_text: str, classes: set[str]) -> None:
    assert request_classes(request_text) == classes


def _op(name: str, method: str, path: str, description: str) -> ToolDef:
    hints = SearchHints(source="github", method=method, path=path)
    return ToolDef(name=name, description=description, hints=hints)


OPS = [
    _op("pulls_create", "POST", "/repos/{owner}/{repo}/pulls", "Create a pull request."),
    _op("pulls_list", "GET", "/repos/{owner}/{repo}/pulls", "List pull requests."),
    _op(
        "interactions_update_pull_request_creation_cap_for_repo",
        "PUT",
        "/repos/{owner}/{repo}/interactions/pull-request-creation-cap",
        "Set how many pull requests a new contributor may open on a repository.",
    ),
    _op("repos_delete", "DELETE", "/repos/{owner}/{repo}", "Delete a repository."),
]


def test_signal_rewards_the_verb_the_object_and_short_operations() -> None:
    shapes = OperationShapes(OPS, ShapeWeights(verb=1.0, resource=1.0, prior=0.0))
    signal = shapes.signal("open a pull request", {})
    # pulls_create: create + pull; pulls_list: pull only; the cap: neither
    assert signal.tolist() == [2.0, 1.0, 0.0, 0.0]
    prior = OperationShapes(OPS, ShapeWeights(verb=0.0, resource=0.0, prior=1.0))
    values = prior.signal("anything", {})
    assert values[0] > values[2]
    assert values[3] == values.max()
    assert abs(float(values.mean())) < 1e-6


def test_free_text_tools_get_no_signal() -> None:
    tools = [ToolDef(name="weather", description="Forecast for a city.")] * 2
    shapes = OperationShapes(tools, ShapeWeights(verb=1.0, resource=1.0, prior=1.0))
    assert not np.any(shapes.signal("create a forecast", {}))


def test_hybrid_ranks_the_operation_the_request_asks_for_first() -> None:
    ranker = HybridRanker(OPS)

    def first(query: str) -> str:
        return ranker.rank(query, k=1)[0].name

    assert first("open a pull request from feature/login into main") == "pulls_create"
    assert first("who opened pull requests this week?") == "pulls_list"
    assert first("permanently remove the old-prototype repo") == "repos_delete"


def test_administrators_operations_rank_lower_unless_the_request_says_admin() -> None:
    tools = [
        _op("conversations_kick", "POST", "/conversations.kick", "Removes a user."),
        _op("admin_users_remove", "POST", "/admin.users.remove", "Removes a user."),
    ]
    shapes = OperationShapes(tools, ShapeWeights(verb=0.0, resource=0.0, prior=0.0, admin=1.0))
    assert shapes.signal("remove dan from the channel", {}).tolist() == [0.0, -1.0]
    assert shapes.signal("as an admin, remove dan from the workspace", {}).tolist() == [0.0, 0.0]


def test_name_coverage_favours_the_name_the_request_explains() -> None:
    shapes = OperationShapes(OPS, ShapeWeights(verb=0.0, resource=0.0, prior=0.0, name=1.0))
    signal = shapes.signal("open a pull request", {}, ["pull", "creat"])
    # pulls_create: both name words; pulls_list: one of two; the cap: 2 of 7; repos_delete: none
    assert signal.tolist() == pytest.approx([1.0, 0.5, 2 / 7, 0.0])


@pytest.mark.parametrize(
    ("path", "own"),
    [
        ("/user", True),
        ("/user/repos", True),
        ("/user/following/{username}", True),
        ("/me/playlists", True),
        ("/users/{username}", False),
        ("/user/{account_id}", False),
        ("/repos/{owner}/{repo}", False),
    ],
)
def test_own_account_paths(path: str, own: bool) -> None:
    assert own_account(path) is own


@pytest.mark.parametrize(
    ("request_text", "speaks"),
    [
        ("who am I logged in as?", True),
        ("list my repos", True),
        ("I\u2019m back", True),
        ("show the repos of torvalds", False),
        ("import the timeline", False),
    ],
)
def test_first_person(request_text: str, speaks: bool) -> None:
    assert first_person(request_text) is speaks


def test_the_callers_own_operations_rank_higher_in_the_first_person() -> None:
    tools = [
        _op("users_get_authenticated", "GET", "/user", "Get the authenticated user."),
        _op("users_get_by_username", "GET", "/users/{username}", "Get a user."),
    ]
    shapes = OperationShapes(tools, ShapeWeights(verb=0.0, resource=0.0, prior=0.0, own=1.0))
    assert shapes.signal("who am I logged in as?", {}).tolist() == [1.0, 0.0]
    assert shapes.signal("who is torvalds?", {}).tolist() == [0.0, 0.0]


def test_a_channel_the_request_posts_in_is_not_its_object() -> None:
    tools = [
        _op("conversations_create", "POST", "/conversations.create", "Initiates a channel."),
        _op("chat_post_message", "POST", "/chat.postMessage", "Sends a message."),
    ]
    shapes = OperationShapes(tools, ShapeWeights(verb=0.0, resource=1.0, prior=0.0))
    mined = {"channel": ("conversat",)}  # what the real catalog's summaries teach
    # "#finance" is a channel, but only where the message goes
    assert shapes.signal("post it in #finance", mined).tolist() == [0.0, 0.0]
    # the channel the request acts on stays its object
    assert shapes.signal("archive #old-stuff", mined).tolist() == [1.0, 0.0]
