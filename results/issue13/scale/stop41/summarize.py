"""The pairs' table (stop 40's summarize.py, with the `bench locks` column):
    summarize.py N"""
import os, runpy, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.argv = [sys.argv[0], sys.argv[1], here, '--locks']
runpy.run_path(os.path.join(here, '..', 'stop40', 'summarize.py'), run_name='__main__')
