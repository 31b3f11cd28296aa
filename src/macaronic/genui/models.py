"""Pydantic models of A2UI v0.8 server-to-client messages and the standard component catalog.

Field names are the JSON keys themselves (camelCase), so a pydantic error location is already a
JSON pointer into the message. Models are strict and forbid unknown keys, like the official
schema with the standard catalog inlined. They know the shape of one message; they do not know
about other messages (ids, references, data-model paths): that is `integrity.py`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

ICON_NAMES = (
    "accountCircle", "add", "arrowBack", "arrowForward", "attachFile", "calendarToday", "call",
    "camera", "check", "close", "delete", "download", "edit", "event", "error", "favorite",
    "favoriteOff", "folder", "help", "home", "info", "locationOn", "lock", "lockOpen", "mail",
    "menu", "moreVert", "moreHoriz", "notificationsOff", "notifications", "payment", "person",
    "phone", "photo", "print", "refresh", "search", "send", "settings", "share", "shoppingCart",
    "star", "starHalf", "starOff", "upload", "visibility", "visibilityOff", "warning",
)
IconName = Literal[ICON_NAMES]  # type: ignore[valid-type]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    # Optional fields default to None, but the official schema has no nulls: reject explicit ones.
    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            nulls = [k for k, v in data.items() if v is None]
            if nulls:
                raise PydanticCustomError("null_property", "null is not allowed", {"property": nulls[0]})
        return data


class _Bound(Strict):
    # v0.8: a literal, a data-model path, or both (the literal then initialises the path).
    @model_validator(mode="after")
    def _literal_or_path(self):
        if all(v is None for v in self.model_dump().values()):
            raise ValueError("needs a literal value or a 'path'")
        return self


class BoundString(_Bound):
    literalString: str | None = None
    path: str | None = None


class BoundNumber(_Bound):
    literalNumber: float | None = None
    path: str | None = None


class BoundBoolean(_Bound):
    literalBoolean: bool | None = None
    path: str | None = None


class BoundArray(_Bound):
    literalArray: list[str] | None = None
    path: str | None = None


class BoundIcon(_Bound):
    literalString: IconName | None = None  # type: ignore[valid-type]
    path: str | None = None


class Template(Strict):
    componentId: str
    dataBinding: str


class Children(Strict):
    explicitList: list[str] | None = None
    template: Template | None = None

    @model_validator(mode="after")
    def _one_kind(self):
        if (self.explicitList is None) == (self.template is None):
            raise ValueError("needs exactly one of 'explicitList' or 'template'")
        return self


class Text(Strict):
    text: BoundString
    usageHint: Literal["h1", "h2", "h3", "h4", "h5", "caption", "body"] | None = None


class Image(Strict):
    url: BoundString
    altText: BoundString | None = None
    fit: Literal["contain", "cover", "fill", "none", "scale-down"] | None = None
    usageHint: Literal[
        "icon", "avatar", "smallFeature", "mediumFeature", "largeFeature", "header"
    ] | None = None


class Icon(Strict):
    name: BoundIcon


class Video(Strict):
    url: BoundString


class AudioPlayer(Strict):
    url: BoundString
    description: BoundString | None = None


Distribution = Literal["start", "center", "end", "spaceBetween", "spaceAround", "spaceEvenly"]
Alignment = Literal["start", "center", "end", "stretch"]


class Row(Strict):
    children: Children
    distribution: Distribution | None = None
    alignment: Alignment | None = None


class Column(Strict):
    children: Children
    distribution: Distribution | None = None
    alignment: Alignment | None = None


class ListComponent(Strict):
    children: Children
    direction: Literal["vertical", "horizontal"] | None = None
    alignment: Alignment | None = None


class Card(Strict):
    child: str


class TabItem(Strict):
    title: BoundString
    child: str


class Tabs(Strict):
    tabItems: list[TabItem]


class Divider(Strict):
    axis: Literal["horizontal", "vertical"] | None = None


class Modal(Strict):
    entryPointChild: str
    contentChild: str


class ContextValue(_Bound):
    path: str | None = None
    literalString: str | None = None
    literalNumber: float | None = None
    literalBoolean: bool | None = None


class ContextEntry(Strict):
    key: str
    value: ContextValue


class Action(Strict):
    name: str = Field(min_length=1)
    context: list[ContextEntry] | None = None


class Button(Strict):
    child: str
    action: Action
    primary: bool | None = None


class CheckBox(Strict):
    label: BoundString
    value: BoundBoolean


class TextField(Strict):
    label: BoundString
    text: BoundString | None = None
    textFieldType: Literal["date", "longText", "number", "shortText", "obscured"] | None = None
    validationRegexp: str | None = None


class DateTimeInput(Strict):
    value: BoundString
    enableDate: bool | None = None
    enableTime: bool | None = None


class ChoiceOption(Strict):
    label: BoundString
    value: str


class MultipleChoice(Strict):
    selections: BoundArray
    options: list[ChoiceOption]
    maxAllowedSelections: int | None = None
    variant: Literal["checkbox", "chips"] | None = None
    filterable: bool | None = None


class Slider(Strict):
    value: BoundNumber
    label: BoundString | None = None
    minValue: float | None = None
    maxValue: float | None = None


# The standard catalog, in the order of standard_catalog_definition.json. Plain data.
STANDARD_COMPONENTS: dict[str, type[Strict]] = {
    "Text": Text, "Image": Image, "Icon": Icon, "Video": Video, "AudioPlayer": AudioPlayer,
    "Row": Row, "Column": Column, "List": ListComponent, "Card": Card, "Tabs": Tabs,
    "Divider": Divider, "Modal": Modal, "Button": Button, "CheckBox": CheckBox,
    "TextField": TextField, "DateTimeInput": DateTimeInput, "MultipleChoice": MultipleChoice,
    "Slider": Slider,
}
MINIMAL_CATALOG_ID = "https://a2ui.org/specification/v0_8/catalogs/minimal/minimal_catalog.json"
STANDARD_CATALOG_ID = "https://a2ui.org/specification/v0_8/standard_catalog_definition.json"
# Catalog id -> the component types it admits (the minimal catalog is a strict subset).
CATALOGS: dict[str, frozenset[str]] = {
    STANDARD_CATALOG_ID: frozenset(STANDARD_COMPONENTS),
    MINIMAL_CATALOG_ID: frozenset({"Text", "Row", "Column", "Button", "TextField"}),
}


# ---- messages -------------------------------------------------------------------------------


class Styles(Strict):
    font: str | None = None
    primaryColor: str | None = Field(default=None, pattern=r"^#[0-9a-fA-F]{6}$")


class BeginRendering(Strict):
    surfaceId: str
    root: str
    catalogId: str | None = None
    styles: Styles | None = None


class ComponentEntry(Strict):
    """One component: `component` stays a raw one-key dict, checked against a catalog by
    `check_component` so that errors point inside it (`.../component/Button/action`)."""

    id: str
    component: dict[str, Any]
    weight: float | None = None

    @property
    def type(self) -> str:
        return next(iter(self.component))

    def parsed(self) -> Strict:
        return STANDARD_COMPONENTS[self.type].model_validate(self.component[self.type])


class SurfaceUpdate(Strict):
    surfaceId: str
    components: list[ComponentEntry] = Field(min_length=1)


class _OneValue(Strict):
    # The schema only says a data entry "should" carry one value; two would be ambiguous.
    @model_validator(mode="after")
    def _exactly_one_value(self):
        values = [k for k, v in self.model_dump().items() if k != "key" and v is not None]
        if len(values) != 1:
            raise ValueError(f"needs exactly one 'value*' property, got {len(values)}")
        return self


class MapEntry(_OneValue):
    key: str
    valueString: str | None = None
    valueNumber: float | None = None
    valueBoolean: bool | None = None


class DataEntry(_OneValue):
    key: str
    valueString: str | None = None
    valueNumber: float | None = None
    valueBoolean: bool | None = None
    valueMap: list[MapEntry] | None = None


class DataModelUpdate(Strict):
    surfaceId: str
    contents: list[DataEntry]
    path: str | None = None


class DeleteSurface(Strict):
    surfaceId: str


MESSAGE_MODELS: dict[str, type[Strict]] = {
    "surfaceUpdate": SurfaceUpdate,
    "dataModelUpdate": DataModelUpdate,
    "beginRendering": BeginRendering,
    "deleteSurface": DeleteSurface,
}
