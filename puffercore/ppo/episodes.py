"""Episode statistics of a PPO run: the means of what the envs' infos report between two
metric rows (`env.EpisodeMeans`, the arithmetic every part shares), and the return of
about the last RECENT_EPISODES episodes (a benchmark's stopping rule and the run
summary). Under torchrun every rank's episodes count."""

from __future__ import annotations

import collections

from puffercore.env import EpisodeMeans

RECENT_EPISODES = 20


class EpisodeStats:
    def __init__(self, group):
        self.group = group
        self.means = EpisodeMeans()  # since the last take_means(), this rank's until gathered
        self.recent: collections.deque = collections.deque()  # (mean return, episodes) per info
        self.pending_recent: list = []  # this rank's, not yet gathered (torchrun jobs)

    def record(self, info: dict) -> None:
        """One batch's info: the means of its ended episodes' statistics, and "episodes"."""
        episodes = info.get("episodes", 0.0)
        if not episodes:
            return
        self.means.add(info)
        if "episode_return" in info:
            if self.group.world_size == 1:
                self._add_recent([(info["episode_return"], episodes)])
            else:  # joins every rank's window at the next take_means()
                self.pending_recent.append((info["episode_return"], episodes))

    def recent_return(self) -> float | None:
        """Mean return of about the last RECENT_EPISODES episodes (infos report per-batch
        means, so the window holds whole batches covering at least that many)."""
        total = sum(count for _, count in self.recent)
        if total < RECENT_EPISODES:
            return None
        return sum(mean * count for mean, count in self.recent) / total

    def take_means(self) -> dict[str, float]:
        """Each statistic's mean since the last call (the episode count is not logged);
        under torchrun every rank calls it together, and the means (and the recent
        window) cover every rank's episodes."""
        self._gather()
        means = self.means.drain()
        means.pop("episodes", None)
        return means

    def _add_recent(self, entries) -> None:
        self.recent.extend(entries)
        while self.recent and sum(count for _, count in self.recent) - self.recent[0][1] >= RECENT_EPISODES:
            self.recent.popleft()

    def _gather(self) -> None:
        if self.group.world_size == 1:
            return
        import torch.distributed as dist

        gathered: list = [None] * self.group.world_size
        dist.all_gather_object(gathered, (self.means, self.pending_recent))
        self.means, self.pending_recent = EpisodeMeans(), []
        for means, recent in gathered:
            self.means.merge(means)
            self._add_recent(recent)  # the same window on every rank
