#!/bin/bash
python3 -c "import os, urllib.request; open('answer.txt', 'w').write(urllib.request.urlopen(os.environ['API_URL'] + '/secret.txt', timeout=5).read().decode())"
