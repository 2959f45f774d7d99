"""The base of every settings model (a job spec's sections, a judge engine's settings): unknown keys are errors,
values are frozen, no inf or nan."""

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
