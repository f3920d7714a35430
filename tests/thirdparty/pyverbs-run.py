#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# pyverbs-run.py -- run rdma-core's pyverbs tests (the run_tests.py suite)
# and print one line per test on stdout:
#     pass|fail|error|skip TEST_ID[: REASON]
# TEST_ID is unittest's full id (tests.test_mr.MWTest.test_mw_type1);
# tracebacks go to stderr.  Usage: pyverbs-run.py TESTDIR [run_tests args]
import os
import sys
import traceback
import unittest
from importlib.machinery import SourceFileLoader


def last_line(err):
    """The exception's last line: what the tally shows as the reason."""
    lines = traceback.format_exception_only(err[0], err[1])
    return lines[-1].strip().replace('\n', ' ') if lines else '?'


class LineResult(unittest.TestResult):
    """Reports each outcome as it happens (a hang still leaves a trail)."""

    def _line(self, outcome, test, reason=None):
        tid = test.id() if hasattr(test, 'id') else str(test)
        print(outcome, tid + (': ' + reason if reason else ''), flush=True)

    def startTest(self, test):
        super().startTest(test)
        print('start', test.id(), file=sys.stderr, flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line('pass', test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line('fail', test, last_line(err))
        traceback.print_exception(*err, file=sys.stderr)

    def addError(self, test, err):
        super().addError(test, err)
        self._line('error', test, last_line(err))
        traceback.print_exception(*err, file=sys.stderr)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line('skip', test, ' '.join(str(reason).split()))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._line('pass', test, 'expected failure')

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._line('fail', test, 'unexpected success')

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = 'fail' if issubclass(err[0], test.failureException) \
                else 'error'
            self._line(kind, subtest, last_line(err))
            traceback.print_exception(*err, file=sys.stderr)


def main():
    testdir = os.path.abspath(sys.argv[1])
    sys.argv = [sys.argv[0]] + sys.argv[2:]
    # as run_tests.py: args_parser beside the tests, the package as 'tests'
    sys.path.insert(0, testdir)
    from args_parser import parser
    tests = SourceFileLoader('tests',
                             os.path.join(testdir, '__init__.py')).load_module()
    parser.parse_args()
    # what is left: test names, as unittest.main(module=tests) takes them
    names = [a for a in sys.argv[1:] if not a.startswith('-')]
    loader = unittest.defaultTestLoader
    suite = loader.loadTestsFromNames(names, tests) if names \
        else loader.loadTestsFromModule(tests)
    result = LineResult()
    suite.run(result)
    return 0


if __name__ == '__main__':
    sys.exit(main())
