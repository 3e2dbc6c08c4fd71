"""``vflow`` version 1.1 (see ``standins.vflow``)."""

from runplane.core import agent
from standins.vflow import CAPABILITY, EFFECTS, build

vflow = agent(CAPABILITY, version="1.1", effects=EFFECTS)(build("1.1"))
