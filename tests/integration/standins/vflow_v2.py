"""``vflow`` version 2 (see ``standins.vflow``)."""

from runplane.core import agent
from standins.vflow import CAPABILITY, EFFECTS, build

vflow = agent(CAPABILITY, version="2", effects=EFFECTS)(build("2"))
