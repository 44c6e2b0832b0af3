#!/bin/bash
python3 -c "import os, urllib.request; urllib.request.urlopen(urllib.request.Request(os.environ['STORE_URL'] + '/greeting', data=b'hello from the client', method='PUT'), timeout=5)"
