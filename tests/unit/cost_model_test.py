#!/usr/bin/env python3
"""benchmarks/cost_model.py's formulas on hand-computed cases."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "benchmarks"))
import cost_model as cm  # noqa: E402

MIB = 1 << 20


class AllreduceTime(unittest.TestCase):
    def test_ring_formula(self):
        # 2(n-1) alpha + S 2(n-1)/n / B = 6e-5 + 1.5e-3
        self.assertAlmostEqual(cm.allreduce_time(1e6, 4, 1e-5, 1e9), 1.56e-3, places=12)

    def test_one_rank_costs_nothing(self):
        self.assertEqual(cm.allreduce_time(1e9, 1, 1e-5, 1e9), 0.0)

    def test_fit_recovers_the_parameters_that_generated_the_data(self):
        alpha, busbw = 7e-6, 3.5e9
        samples = [(n, s, cm.allreduce_time(s, n, alpha, busbw))
                   for n in (2, 4) for s in (1 << 16, 1 << 20, 1 << 24)]
        fitted_alpha, fitted_busbw = cm.fit_alpha_busbw(samples)
        self.assertAlmostEqual(fitted_alpha / alpha, 1.0, places=9)
        self.assertAlmostEqual(fitted_busbw / busbw, 1.0, places=9)


class Buckets(unittest.TestCase):
    def test_reverse_order_first_bucket_capped_at_one_mib(self):
        # Reverse: t3 (10 B) + t2 (3 MiB) reach the 1 MiB first cap; t1 + t0
        # stay under the 4 MiB cap and form the tail bucket.
        sizes = [100, 2 * MIB, 3 * MIB, 10]
        self.assertEqual(cm.bucket_layout(sizes, 4 * MIB), [[3, 2], [1, 0]])
        self.assertEqual(cm.bucket_layout(sizes, None), [[3, 2, 1, 0]])
        self.assertEqual(cm.bucket_layout(sizes, 1), [[3, 2], [1], [0]])


class Step(unittest.TestCase):
    # Layers of 1 MiB and 3 MiB: backward 4 s spread 1 : 3, so the last layer
    # is ready at 3 s and the first at 4 s; one all-reduce takes 1 s per MiB.
    layers = [[MIB], [3 * MIB]]

    def comm(self, nbytes):
        return nbytes / MIB

    def test_full_overlap(self):
        # Buckets [3 MiB] ready at 3 -> 3..6, [1 MiB] ready at 4 -> 6..7.
        step, exposed = cm.simulate_step(self.layers, 1.0, 4.0, 0.5, 2 * MIB, self.comm, True)
        self.assertAlmostEqual(step, 1.0 + 7.0 + 0.5)
        self.assertAlmostEqual(exposed, 3.0)

    def test_no_overlap(self):
        step, exposed = cm.simulate_step(self.layers, 1.0, 4.0, 0.5, 2 * MIB, self.comm, False)
        self.assertAlmostEqual(step, 1.0 + 8.0 + 0.5)
        self.assertAlmostEqual(exposed, 4.0)

    def test_single_bucket_waits_for_all_of_backward(self):
        step, exposed = cm.simulate_step(self.layers, 1.0, 4.0, 0.5, None, self.comm, True)
        self.assertAlmostEqual(step, 1.0 + 8.0 + 0.5)
        self.assertAlmostEqual(exposed, 4.0)


if __name__ == "__main__":
    unittest.main()
