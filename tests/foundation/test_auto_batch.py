"""batch="auto": the choice of K from timed launches (fastmog._auto_batch),
fed by hand; the pipeline that times them is tested on the GPU in
tests/mog2/test_pipeline.py."""
from fastmog._auto_batch import CANDIDATES, FRAMES, MARGIN, MIN_LAUNCHES, WARM, AutoBatch


def launches(k):
    return max(MIN_LAUNCHES, FRAMES // k)


def feed(auto, kernel_per_frame, copies_per_frame=0.168, limit=200):
    """Launches as the pipeline hands them back, each of the K `auto` asks
    for, until it chooses; kernel_per_frame maps K to ms a frame. Returns
    the K of every launch."""
    asked = []
    while auto.chosen is None and len(asked) < limit:
        k = auto.batch
        asked.append(k)
        auto.add(k, kernel_per_frame[k] * k, copies_per_frame * k, 0.9 * copies_per_frame * k)
    return asked


def test_a_kernel_under_the_copies_keeps_one_frame_a_launch():
    auto = AutoBatch()
    asked = feed(auto, {1: 0.11})
    assert auto.chosen == 1 and set(asked) == {1}
    assert len(asked) == WARM + launches(1)
    assert "1 frame a launch" in auto.describe() and "0.110" in auto.describe()
    assert not auto.timing


def test_the_smallest_batch_whose_kernel_is_under_the_copies():
    auto = AutoBatch()
    asked = feed(auto, {1: 0.224, 2: 0.19, 4: 0.14, 8: 0.12})
    assert auto.chosen == 4
    assert asked == [1] * (WARM + launches(1)) + [2] * launches(2) + [4] * launches(4)
    assert "4 frames a launch" in auto.describe()


def test_a_kernel_slower_than_the_copies_at_every_k_takes_the_fastest():
    auto = AutoBatch()
    asked = feed(auto, {1: 0.40, 2: 0.30, 4: 0.26, 8: 0.27})
    assert auto.chosen == 4 and asked[-1] == CANDIDATES[-1]
    line = auto.describe()
    assert "slowest stage at every K tried" in line and "K=8 0.270" in line


def test_the_margin_leaves_the_copies_slack():
    # a kernel just under the copies is not under MARGIN of them
    auto = AutoBatch()
    feed(auto, {1: 0.168 * (MARGIN + 0.05), 2: 0.168 * (MARGIN - 0.05), 4: 1, 8: 1})
    assert auto.chosen == 2


def test_the_download_counts_when_it_is_the_slower_copy():
    auto = AutoBatch()
    for _ in range(WARM + launches(1)):
        auto.add(1, 0.15, 0.10, 0.20)       # kernel over 0.9 x upload, under 0.9 x download
    assert auto.chosen == 1


def test_late_launches_of_an_earlier_k_do_not_decide():
    # launches still in the ring when K changed come back with their own K
    auto = AutoBatch()
    feed(auto, {1: 0.3, 2: 0.3, 4: 0.3, 8: 0.3}, limit=WARM + launches(1))
    assert auto.batch == 2 and auto.chosen is None
    for _ in range(5):
        auto.add(1, 0.01, 0.168, 0.168)     # K=1 finishing late, now fast: no choice from it
    assert auto.chosen is None and auto.batch == 2


def test_frames_that_end_during_the_measurement_say_so():
    auto = AutoBatch()
    auto.add(1, 0.1, 0.168, 0.168)
    assert auto.chosen is None and auto.timing
    assert auto.describe() == ("1 frame a launch, not measured to the end (the frames ended "
                               "first, or checkpoints cut every launch short)")


def test_warm_launches_are_left_out():
    auto = AutoBatch()
    for _ in range(WARM):
        auto.add(1, 100.0, 0.1, 0.1)        # first frames: slow, not counted
    assert auto.kernel == {} and auto.copies == []


def test_ahead_is_the_largest_k_a_launch_may_yet_hold():
    auto = AutoBatch()
    assert (auto.largest, auto.ahead) == (1, 2)             # measuring 1: 2 may come next
    feed(auto, {1: 0.3, 2: 0.3, 4: 0.3, 8: 0.3}, limit=WARM + launches(1))
    assert (auto.largest, auto.ahead) == (2, 4)
    feed(auto, {1: 0.3, 2: 0.1, 4: 0.3, 8: 0.3})
    assert auto.chosen == 2 and (auto.largest, auto.ahead) == (2, 2)


def test_the_copies_are_measured_one_frame_a_launch():
    # a larger launch's upload span holds the host's pace between its frames
    auto = AutoBatch()
    for _ in range(WARM + launches(1)):
        auto.add(1, 0.3, 0.2, 0.2)           # kernel over the copies at K = 1
    for _ in range(launches(2)):
        auto.add(2, 2 * 0.17, 2 * 5.0, 0.0)  # slow uploads: a decoder between the frames
    assert auto.chosen == 2                  # 0.17 <= 0.9 x 0.2, the copies of one frame
    assert auto.copies == [0.2] * launches(1)
